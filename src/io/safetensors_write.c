/* st_write (safetensors.h): the header built with cJSON, the data converted to little-endian through a small
 * buffer, the checksum accumulated as the bytes go out and written into its place at the end; the file written
 * atomically (core/atomic_file.h). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_file.h"
#include "core/checked.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "io/safetensors.h"

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

/* Bytes per element: float32, or int64 for a counter. */
static size_t elem_bytes(const st_tensor *t) { return t->counts ? sizeof(int64_t) : sizeof(float); }

/* {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} under the tensor's name (dtype I64: a counter). */
static bool add_tensor(cJSON *root, const st_tensor *t, size_t begin, size_t end) {
    cJSON *o = cJSON_AddObjectToObject(root, t->name);
    if (!o || !cJSON_AddStringToObject(o, "dtype", t->counts ? "I64" : "F32")) return false;
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
        ok = size_mul(t[i].numel, elem_bytes(&t[i]), &bytes) && size_add(at, bytes, &end) &&
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

/* Counters as little-endian int64 bytes (few: one per BatchNorm layer). */
static bool put_counts_le(out_file *o, const int64_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char buf[8];
        for (int b = 0; b < 8; b++) buf[b] = (unsigned char)((uint64_t)v[i] >> (8 * b));
        if (!put(o, buf, 8)) return false;
    }
    return true;
}

/* The length, the padded header, every tensor, then the checksum into its placeholder. False on any failure. */
static bool write_file(FILE *f, const char *header, const st_tensor *t, size_t n) {
    const size_t len = strlen(header), padded = (len + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN;
    unsigned char count[8];
    for (int i = 0; i < 8; i++) count[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    out_file o = {.f = f};
    if (!put(&o, count, 8) || !put(&o, header, len)) return false;
    for (size_t i = len; i < padded; i++)
        if (!put(&o, " ", 1)) return false;
    for (size_t i = 0; i < n; i++)
        if (!(t[i].counts ? put_counts_le(&o, t[i].counts, t[i].numel) : put_floats_le(&o, t[i].values, t[i].numel)))
            return false;
    const char *slot = strstr(header, "\"" ST_CRC_KEY "\":\"" CRC_PLACEHOLDER "\"");
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", o.crc);
    const long at = 8 + (long)(slot - header) + (long)sizeof("\"" ST_CRC_KEY "\":\"") - 1;
    return slot && fseek(f, at, SEEK_SET) == 0 && fwrite(hex, 1, 8, f) == 8;
}

typedef struct st_job {
    const char *path, *header;
    const st_tensor *t;
    size_t n;
} st_job;

static snug_status fill(FILE *f, void *user, snug_error *err) {
    const st_job *job = user;
    if (write_file(f, job->header, job->t, job->n) || ferror(f)) return SNUG_OK; /* a refused write: ferror */
    return snug_fail(err, SNUG_E_IO, "cannot place the checksum in '%s': %s", job->path, strerror(errno));
}

snug_status st_write(const char *path, const char *tmp, const st_tensor *t, size_t n, const st_pair *meta,
                     size_t n_meta, snug_error *err) {
    char *header = build_header(t, n, meta, n_meta);
    if (!header) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the header of '%s'", path);
    st_job job = {.path = path, .header = header, .t = t, .n = n};
    snug_status s = atomic_file_write(path, tmp, "weights file", fill, &job, err);
    cJSON_free(header);
    return s;
}
