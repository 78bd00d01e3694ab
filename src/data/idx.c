/* Opening, validating and reading IDX files. Every check names the path, says what is wrong with the numbers involved,
 * and how to get a good file. */
#define _POSIX_C_SOURCE 200809L

#include "data/idx.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"

#define IDX_TYPE_UBYTE 0x08

static uint32_t read_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* "60000 x 28 x 28" for messages. */
static void format_dims(const size_t *dims, int ndims, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndims && used < len; i++) {
        int w = snprintf(buf + used, len - used, i ? " x %zu" : "%zu", dims[i]);
        if (w < 0) return;
        used += (size_t)w;
    }
}

/* Checks the magic and reads ndims and the dimensions into f. */
/* b: the first head_len bytes of a file of len bytes (head_len >= 4, and all of the header when the file holds
 * it). */
static snug_status parse_header(const char *path, const uint8_t *b, size_t head_len, size_t len,
                                int expected_ndims, idx_file *f, snug_error *err) {
    if (b[0] != 0 || b[1] != 0)
        return snug_fail(err, SNUG_E_FORMAT, "%s: bad magic: first bytes %02x %02x, an IDX file starts with 00 00 "
                         "(is it an IDX file? a .gz must be unpacked first)", path, b[0], b[1]);
    if (b[2] != IDX_TYPE_UBYTE)
        return snug_fail(err, SNUG_E_FORMAT, "%s: bad magic: element type 0x%02x, only 0x08 (unsigned byte) is "
                         "supported", path, b[2]);
    int ndims = b[3];
    if (ndims < 1 || ndims > IDX_MAX_DIMS)
        return snug_fail(err, SNUG_E_FORMAT, "%s: bad magic: %d dimensions, supported are 1 to %d", path, ndims,
                         IDX_MAX_DIMS);
    if (expected_ndims > 0 && ndims != expected_ndims)
        return snug_fail(err, SNUG_E_FORMAT, "%s: has %d dimension%s, expected %d (MNIST images have 3, labels 1: "
                         "were the two files swapped?)", path, ndims, ndims == 1 ? "" : "s", expected_ndims);
    size_t header = 4 + 4 * (size_t)ndims;
    if (len < header || head_len < header)
        return snug_fail(err, SNUG_E_FORMAT, "%s: truncated: expected at least %zu bytes of header, found %zu",
                         path, header, len);
    for (int i = 0; i < ndims; i++) {
        f->dims[i] = read_be32(b + 4 + 4 * (size_t)i);
        if (f->dims[i] == 0)
            return snug_fail(err, SNUG_E_FORMAT, "%s: dimension %d is 0: the file holds no data", path, i);
    }
    f->ndims = ndims;
    return SNUG_OK;
}

/* Checks that header + elements is exactly the file size. */
static snug_status check_size(const char *path, idx_file *f, size_t len, snug_error *err) {
    char dims[96];
    format_dims(f->dims, f->ndims, dims, sizeof dims);
    size_t header = 4 + 4 * (size_t)f->ndims, total;
    if (!size_prod(f->dims, f->ndims, &f->count) || !size_add(header, f->count, &total))
        return snug_fail(err, SNUG_E_FORMAT, "%s: dimensions %s overflow size_t: the header is corrupt", path, dims);
    if (len < total)
        return snug_fail(err, SNUG_E_FORMAT, "%s: truncated: expected %zu bytes (%s), found %zu; re-download it "
                         "with `make data`", path, total, dims, len);
    if (len > total)
        return snug_fail(err, SNUG_E_FORMAT, "%s: trailing bytes: expected %zu bytes (%s), found %zu (%zu extra)",
                         path, total, dims, len, len - total);
    return SNUG_OK;
}

snug_status idx_open(const char *path, int expected_ndims, idx_file *f, snug_error *err) {
    memset(f, 0, sizeof *f);
    if (!path) return snug_fail(err, SNUG_E_ARG, "idx_open: path is NULL");
    snug_status s = data_file_open(path, "an IDX file", "(MNIST is four IDX files in one directory)", 4, &f->file,
                                   err);
    if (s != SNUG_OK) return s;
    uint8_t head[4 + 4 * IDX_MAX_DIMS];
    const size_t head_len = f->file.len < sizeof head ? f->file.len : sizeof head;
    if (!data_file_read(&f->file, 0, head, head_len)) s = data_file_status(&f->file, err);
    if (s == SNUG_OK) s = parse_header(path, head, head_len, f->file.len, expected_ndims, f, err);
    if (s == SNUG_OK) s = check_size(path, f, f->file.len, err);
    if (s != SNUG_OK) {
        idx_close(f);
        return s;
    }
    f->data_offset = 4 + 4 * (size_t)f->ndims;
    return SNUG_OK;
}

bool idx_read(idx_file *f, size_t first, size_t n, uint8_t *buf) {
    return data_file_read(&f->file, f->data_offset + first, buf, n);
}

snug_status idx_status(const idx_file *f, snug_error *err) { return data_file_status(&f->file, err); }

void idx_close(idx_file *f) {
    if (!f) return;
    data_file_close(&f->file);
    memset(f, 0, sizeof *f);
    f->file.fd = -1;
}
