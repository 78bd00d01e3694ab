/* Saving the weights as safetensors (https://github.com/huggingface/safetensors/, "format" section):
 *   8 bytes    n, the header length, a little-endian uint64
 *   n bytes    JSON: {"__metadata__": {...}, "<name>": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]},
 *              ...}, padded with spaces so that the data starts at a multiple of 8 bytes
 *   the data   every tensor, contiguous, little-endian, in graph order; offsets count from the data's start.
 * Parameters and BatchNorm's running statistics alike, under their state_dict names, so PyTorch reads the file
 * with safetensors.torch.load_file and load_state_dict. Written atomically (a temporary file, fsync, rename), so a
 * crash or a full disk never leaves a half-written file under the final name. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/error.h"
#include "train/trainer.h"

#define HEADER_ALIGN 8

/* The values of parameter i: in the parameter block, or in the state block for a buffer. */
static const float *param_values(const snug_trainer *tr, const graph_param *p) {
    return (p->buffer ? tr->x.state : tr->x.params) + p->offset;
}

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

/* {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} under the parameter's name. */
static bool add_tensor(cJSON *root, const graph_param *p, size_t begin, size_t end) {
    cJSON *t = cJSON_AddObjectToObject(root, p->name);
    if (!t || !cJSON_AddStringToObject(t, "dtype", "F32")) return false;
    cJSON *shape = cJSON_AddArrayToObject(t, "shape");
    cJSON *offsets = cJSON_AddArrayToObject(t, "data_offsets");
    size_t span[2] = {begin, end};
    return shape && offsets && add_numbers(shape, p->shape.dims, p->shape.rank) && add_numbers(offsets, span, 2);
}

/* String-to-string metadata, as the format requires. */
static bool add_metadata(cJSON *root, const snug_trainer *tr) {
    char steps[32];
    snprintf(steps, sizeof steps, "%ld", tr->step);
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    return m && cJSON_AddStringToObject(m, "format", "pt") &&
           cJSON_AddStringToObject(m, "producer", "snug " SNUG_VERSION) &&
           cJSON_AddStringToObject(m, "model", tr->g->name) && cJSON_AddStringToObject(m, "steps", steps);
}

/* The JSON header, unpadded; NULL when the system refused memory or a size overflowed. */
static char *build_header(const snug_trainer *tr) {
    cJSON *root = cJSON_CreateObject();
    bool ok = root && add_metadata(root, tr);
    size_t at = 0;
    for (int i = 0; ok && i < tr->g->n_params; i++) {
        const graph_param *p = &tr->g->params[i];
        size_t bytes, end;
        ok = size_mul(p->numel, sizeof(float), &bytes) && size_add(at, bytes, &end) && add_tensor(root, p, at, end);
        at = end;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

static void put_u64_le(unsigned char out[8], uint64_t v) {
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(v >> (8 * i));
}

/* The values as little-endian bytes whatever the host's byte order, in chunks through a small buffer. */
static bool write_floats_le(FILE *f, const float *v, size_t n) {
    unsigned char buf[4096];
    for (size_t done = 0; done < n;) {
        size_t chunk = n - done < sizeof buf / 4 ? n - done : sizeof buf / 4;
        for (size_t i = 0; i < chunk; i++) {
            uint32_t bits;
            memcpy(&bits, &v[done + i], sizeof bits);
            for (int b = 0; b < 4; b++) buf[4 * i + (size_t)b] = (unsigned char)(bits >> (8 * b));
        }
        if (fwrite(buf, 4, chunk, f) != chunk) return false;
        done += chunk;
    }
    return true;
}

/* The header length, the header padded with spaces, then every tensor; forced to disk. False with errno set on
 * any failure. */
static bool write_file(FILE *f, const snug_trainer *tr, const char *header) {
    size_t len = strlen(header), padded = (len + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN;
    unsigned char count[8];
    put_u64_le(count, (uint64_t)padded);
    if (fwrite(count, 1, 8, f) != 8 || fwrite(header, 1, len, f) != len) return false;
    for (size_t i = len; i < padded; i++)
        if (fputc(' ', f) == EOF) return false;
    for (int i = 0; i < tr->g->n_params; i++) {
        const graph_param *p = &tr->g->params[i];
        if (!write_floats_le(f, param_values(tr, p), p->numel)) return false;
    }
    return fflush(f) == 0 && fsync(fileno(f)) == 0;
}

/* Closes f and moves tmp to path; 0, or the errno of the first step that failed. */
static int finish_file(FILE *f, bool written, int write_errno, const char *tmp, const char *path) {
    int e = written ? 0 : write_errno;
    if (fclose(f) != 0 && e == 0) e = errno;
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    return e;
}

/* Writes header and data to tmp, then renames it to path. */
static snug_status write_atomically(const snug_trainer *tr, const char *header, const char *tmp, const char *path,
                                    snug_error *err) {
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return snug_fail(err, SNUG_E_IO, "cannot create '%s': %s; check that its folder exists and is writable", tmp,
                         strerror(errno));
    errno = 0;
    bool written = write_file(f, tr, header);
    int e = finish_file(f, written, errno ? errno : EIO, tmp, path);
    if (e == 0) return SNUG_OK;
    remove(tmp);
    return snug_fail(err, SNUG_E_IO, "cannot write the weights to '%s': %s (is the disk full?); an existing '%s' is "
                     "left as it was", path, strerror(e), path);
}

snug_status snug_trainer_save(const snug_trainer *tr, const char *path, snug_error *err) {
    if (tr->dist.rank != 0) return SNUG_OK;
    char *header = build_header(tr);
    if (!header)
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the safetensors header of model '%s' "
                         "(%d tensors)", tr->g->name, tr->g->n_params);
    size_t len = strlen(path) + sizeof ".tmp";
    char *tmp = malloc(len);
    snug_status s = SNUG_E_OOM;
    if (tmp) {
        snprintf(tmp, len, "%s.tmp", path);
        s = write_atomically(tr, header, tmp, path, err);
    } else {
        snug_fail(err, SNUG_E_OOM, "out of memory: the system refused a file name");
    }
    free(tmp);
    cJSON_free(header);
    return s;
}
