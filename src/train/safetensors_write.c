/* st_write (safetensors.h): the header built with cJSON, the data converted to little-endian through a small
 * buffer, the checksum accumulated as the bytes go out and written into its place at the end. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "train/safetensors.h"

#define HEADER_ALIGN 8
#define CRC_PLACEHOLDER "00000000"

static bool add_numbers(cJSON *array, const size_t *v, int n) {
    for (int i = 0; i < n; i++) {
        cJSON *num = cJSON_CreateNumber((double)v[i]);
        if (!num || !cJSON_AddItemToArray(array, num)) {
            cJSON_Delete(num);
            return false;
        }
    }
    return true;
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} under the tensor's name. */
static bool add_tensor(cJSON *root, const st_tensor *t, size_t begin, size_t end) {
    cJSON *o = cJSON_AddObjectToObject(root, t->name);
    if (!o || !cJSON_AddStringToObject(o, "dtype", "F32")) return false;
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    cJSON *offsets = cJSON_AddArrayToObject(o, "data_offsets");
    size_t span[2] = {begin, end};
    return shape && offsets && add_numbers(shape, t->dims, t->rank) && add_numbers(offsets, span, 2);
}

/* The JSON header, unpadded, with the checksum's placeholder; NULL when out of memory or a size overflowed. */
static char *build_header(const st_tensor *t, size_t n, const st_pair *meta, size_t n_meta) {
    cJSON *root = cJSON_CreateObject(), *m = root ? cJSON_AddObjectToObject(root, "__metadata__") : NULL;
    bool ok = m != NULL;
    for (size_t i = 0; ok && i < n_meta; i++) ok = cJSON_AddStringToObject(m, meta[i].key, meta[i].value) != NULL;
    ok = ok && cJSON_AddStringToObject(m, ST_CRC_KEY, CRC_PLACEHOLDER) != NULL;
    size_t at = 0;
    for (size_t i = 0; ok && i < n; i++) {
        size_t bytes, end = 0;
        ok = size_mul(t[i].numel, sizeof(float), &bytes) && size_add(at, bytes, &end) &&
             add_tensor(root, &t[i], at, end);
        at = end;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

typedef struct out_file {
    FILE *f;
    uint32_t crc;
} out_file;

static bool put(out_file *o, const void *bytes, size_t len) {
    o->crc = crc32c_update(o->crc, bytes, len);
    return fwrite(bytes, 1, len, o->f) == len;
}

/* The values as little-endian bytes whatever the host's byte order, in chunks through a small buffer. */
static bool put_floats_le(out_file *o, const float *v, size_t n) {
    unsigned char buf[4096];
    for (size_t done = 0; done < n;) {
        size_t chunk = n - done < sizeof buf / 4 ? n - done : sizeof buf / 4;
        for (size_t i = 0; i < chunk; i++) {
            uint32_t bits;
            memcpy(&bits, &v[done + i], sizeof bits);
            for (int b = 0; b < 4; b++) buf[4 * i + (size_t)b] = (unsigned char)(bits >> (8 * b));
        }
        if (!put(o, buf, 4 * chunk)) return false;
        done += chunk;
    }
    return true;
}

/* The length, the padded header, every tensor, then the checksum into its placeholder; forced to disk. False
 * with errno set on any failure. */
static bool write_file(FILE *f, const char *header, const st_tensor *t, size_t n) {
    const size_t len = strlen(header), padded = (len + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN;
    unsigned char count[8];
    for (int i = 0; i < 8; i++) count[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    out_file o = {.f = f};
    if (!put(&o, count, 8) || !put(&o, header, len)) return false;
    for (size_t i = len; i < padded; i++)
        if (!put(&o, " ", 1)) return false;
    for (size_t i = 0; i < n; i++)
        if (!put_floats_le(&o, t[i].values, t[i].numel)) return false;
    const char *slot = strstr(header, "\"" ST_CRC_KEY "\":\"" CRC_PLACEHOLDER "\"");
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", o.crc);
    const long at = 8 + (long)(slot - header) + (long)sizeof("\"" ST_CRC_KEY "\":\"") - 1;
    return slot && fseek(f, at, SEEK_SET) == 0 && fwrite(hex, 1, 8, f) == 8 && fflush(f) == 0 &&
           fsync(fileno(f)) == 0;
}

/* The folder of path synced, so that the rename into it survives a power cut. */
static int sync_folder(const char *path) {
    char *copy = strdup(path);
    if (!copy) return ENOMEM;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    int e = fd < 0 || fsync(fd) != 0 ? errno : 0;
    if (fd >= 0) close(fd);
    free(copy);
    return e;
}

snug_status st_write(const char *path, const char *tmp, const st_tensor *t, size_t n, const st_pair *meta,
                     size_t n_meta, bool sync_dir, snug_error *err) {
    char *header = build_header(t, n, meta, n_meta);
    if (!header) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the header of '%s'", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        cJSON_free(header);
        return snug_fail(err, SNUG_E_IO, "cannot create '%s': %s; check that its folder exists and is writable", tmp,
                         strerror(e));
    }
    errno = 0;
    int e = write_file(f, header, t, n) ? 0 : errno ? errno : EIO;
    cJSON_free(header);
    if (fclose(f) != 0 && e == 0) e = errno;
    const bool written = e == 0;
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    const bool renamed = written && e == 0;
    if (e == 0 && sync_dir) e = sync_folder(path);
    if (e == 0) return SNUG_OK;
    remove(tmp);
    struct stat st;
    snug_fail(err, SNUG_E_IO, "cannot write '%s': %s (is the disk full?)", path, strerror(e));
    if (!renamed && stat(path, &st) == 0) snug_error_append(err, "; the existing '%s' is left as it was", path);
    return SNUG_E_IO;
}
