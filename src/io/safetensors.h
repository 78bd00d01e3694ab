/* The safetensors files snug writes and reads (https://github.com/huggingface/safetensors/, "format" section):
 *   8 bytes    n, the header length, a little-endian uint64
 *   n bytes    JSON: {"__metadata__": {"key": "value", ...}, "<name>": {"dtype": "F32", "shape": [...],
 *              "data_offsets": [b, e]}, ...}, padded with spaces so that the data starts at a multiple of 8 bytes
 *   the data   every tensor, contiguous, little-endian float32 (int64 for counters); offsets count from the
 *              data's start.
 * snug adds one metadata entry, "crc32c": the CRC-32C (8 hex digits) of the whole file as written with those 8
 * digits all '0', so that a reader detects a truncated, corrupted or spliced file. Readers of the format ignore
 * it; snug checks it wherever it is present. */
#ifndef SNUG_IO_SAFETENSORS_H
#define SNUG_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "snug.h"

#define ST_CRC_KEY "crc32c"

/* One tensor to write: numel float32 values of the given shape, under name; or, with counts set (values NULL),
 * numel int64 values (dtype I64: BatchNorm's num_batches_tracked counter, which PyTorch keeps as int64). */
typedef struct st_tensor {
    const char *name;
    const size_t *dims;
    int rank;
    const float *values;
    size_t numel;
    const int64_t *counts;
} st_tensor;

/* One metadata entry: the format allows strings only. */
typedef struct st_pair {
    const char *key, *value;
} st_pair;

/* Writes the tensors in order, with the metadata and the checksum, atomically (core/atomic_file.h) through tmp
 * (NULL: "PATH.tmp"), so that no reader ever sees half a file under path. On failure path is left as it was and
 * err says so. */
snug_status st_write(const char *path, const char *tmp, const st_tensor *t, size_t n, const st_pair *meta,
                     size_t n_meta, snug_error *err);

/* Checks a file's "crc32c" against its bytes: SNUG_OK when they agree or the file has none (*present false),
 * SNUG_E_FORMAT naming the file when they do not. header: the padded header as read (n bytes after the
 * length), f positioned anywhere; the data is read from f. */
snug_status st_check_crc(FILE *f, const char *path, const char *header, uint64_t header_len, bool *present,
                         snug_error *err);

/* Reading (safetensors_read.c): a file opened and checked as untrusted input, up to the values. */
typedef struct st_entry {
    const char *name;
    const struct cJSON *json;
    uint64_t begin, end;   /* byte range in the data section */
} st_entry;

typedef struct st_file {
    const char *path;
    FILE *f;
    uint64_t size, header_len, data_len;
    struct cJSON *root;
    st_entry *entries;
    size_t n;
} st_file;

/* Opens path and checks it: the header length against the file size, the checksum where there is one, the JSON,
 * each entry (dtype, shape, offsets). */
snug_status st_file_open(st_file *sf, const char *path, snug_error *err);
/* The entries together: no overlap, no gap, the data covered. */
snug_status st_file_check_layout(st_file *sf, snug_error *err);
void st_file_close(st_file *sf);
/* The metadata entry `key`, or NULL. */
const char *st_metadata(const st_file *sf, const char *key);

/* The first value of a tensor that is not finite. */
typedef struct st_first_bad {
    size_t index;          /* numel when every value is finite */
    float value;
} st_first_bad;

/* Where tensor `name` (an entry of the open file) starts in the data section. */
uint64_t st_tensor_begin(const st_file *sf, const char *name);
/* The numel little-endian floats at data offset `begin`: into v, or with v NULL only read; the first that is
 * not finite into *bad. False on a read error. */
bool st_read_floats(st_file *sf, uint64_t begin, float *v, size_t numel, st_first_bad *bad);

#endif
