/* Reading a safetensors file (the layout is in safetensors.h) as untrusted input: every number in it is checked
 * before it is used and every check has its own message: the header length against the file size, the checksum
 * where there is one, the JSON, each entry (dtype, shape, offsets inside the data), the entries together (no
 * overlap, no gap, the data fully covered); then values read as little-endian float32, the first non-finite one
 * noted. What the tensors must be for a model is train/load.c's. Names and dtypes from the header reach messages
 * escaped (core/escape.h). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/escape.h"
#include "io/safetensors.h"

#define HEADER_MAX ((uint64_t)100 << 20) /* the limit the safetensors library itself enforces */
#define MAX_JSON_INT 9007199254740992.0  /* 2^53: every whole number below is exact in cJSON's double */

static uint64_t get_u64_le(const unsigned char b[8]) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static snug_status open_file(st_file *sf, snug_error *err) {
    sf->f = fopen(sf->path, "rb");
    if (!sf->f)
        return snug_fail(err, SNUG_E_IO, "cannot open the weights file '%s': %s", sf->path, strerror(errno));
    struct stat st;
    if (fstat(fileno(sf->f), &st) != 0)
        return snug_fail(err, SNUG_E_IO, "cannot stat '%s': %s", sf->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return snug_fail(err, SNUG_E_IO, "'%s' is not a regular file; expected a .safetensors weights file",
                         sf->path);
    sf->size = (uint64_t)st.st_size;
    return SNUG_OK;
}

/* The 8-byte length and its sanity: at least "{}", at most the limit, inside the file. */
static snug_status read_header_len(st_file *sf, snug_error *err) {
    unsigned char b[8];
    if (sf->size < 8 || fread(b, 1, 8, sf->f) != 8)
        return snug_fail(err, SNUG_E_FORMAT, "'%s' is %ju bytes, shorter than the 8-byte header length of a "
                         "safetensors file: truncated, or not a weights file", sf->path, (uintmax_t)sf->size);
    sf->header_len = get_u64_le(b);
    if (sf->header_len < 2 || sf->header_len > HEADER_MAX)
        return snug_fail(err, SNUG_E_FORMAT, "'%s': header length %ju is out of range (2 to %ju bytes): not a "
                         "safetensors file", sf->path, (uintmax_t)sf->header_len, (uintmax_t)HEADER_MAX);
    if (sf->header_len > sf->size - 8)
        return snug_fail(err, SNUG_E_FORMAT, "'%s': the header length says %ju bytes but only %ju follow the "
                         "length: the file is truncated", sf->path, (uintmax_t)sf->header_len,
                         (uintmax_t)(sf->size - 8));
    sf->data_len = sf->size - 8 - sf->header_len;
    return SNUG_OK;
}

/* A few bytes of text around a parse error, escaped, for the message. */
static escaped excerpt(const char *at) {
    return at ? escape_range(at, strnlen(at, 24)) : escape_text("");
}

/* The JSON text: one object, nothing but spaces after it, no NUL inside. */
static snug_status parse_header(st_file *sf, snug_error *err) {
    char *text = malloc((size_t)sf->header_len + 1);
    if (!text) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused %ju bytes for the header of "
                                "'%s'", (uintmax_t)sf->header_len, sf->path);
    snug_status s = SNUG_OK;
    if (fread(text, 1, (size_t)sf->header_len, sf->f) != (size_t)sf->header_len) {
        s = snug_fail(err, SNUG_E_IO, "cannot read the header of '%s': %s", sf->path,
                      ferror(sf->f) ? strerror(errno) : "unexpected end of file");
    } else {
        text[sf->header_len] = '\0';
        bool present = false;
        const char *end = NULL;
        s = st_check_crc(sf->f, sf->path, text, sf->header_len, &present, err);
        if (s != SNUG_OK) {
            free(text);
            return s;
        }
        if (strlen(text) != (size_t)sf->header_len)
            s = snug_fail(err, SNUG_E_FORMAT, "'%s': the header holds a NUL byte at %zu: not a safetensors file",
                          sf->path, strlen(text));
        else if (!(sf->root = cJSON_ParseWithOpts(text, &end, true))) {
            s = snug_fail(err, SNUG_E_FORMAT, "'%s': the header is not valid JSON (at byte %td of %ju: '%s')",
                          sf->path, end ? end - text : 0, (uintmax_t)sf->header_len,
                          excerpt(end ? end : cJSON_GetErrorPtr()).text);
        } else if (!cJSON_IsObject(sf->root))
            s = snug_fail(err, SNUG_E_FORMAT, "'%s': the header is JSON but not an object of tensors", sf->path);
    }
    free(text);
    return s;
}

/* A whole number in [0, 2^53). */
static bool json_whole(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0 && d < MAX_JSON_INT) || d != (double)(uint64_t)d) return false;
    *out = (uint64_t)d;
    return true;
}

/* Bytes per element of a safetensors dtype; 0 when unknown. */
static size_t dtype_size(const char *dtype) {
    static const struct { const char *name; size_t size; } table[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
        {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, dtype) == 0) return table[i].size;
    return 0;
}

/* The element count of a "shape" array; false (with the message) when it is not a list of whole numbers. */
static snug_status shape_numel(const st_file *sf, const char *name, const cJSON *shape, uint64_t *numel,
                               snug_error *err) {
    if (!cJSON_IsArray(shape))
        return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' has no \"shape\" list", sf->path,
                         escape_text(name).text);
    uint64_t n = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        uint64_t v;
        if (!json_whole(d, &v))
            return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' has a shape entry that is not a whole number "
                             ">= 0", sf->path, escape_text(name).text);
        if (v != 0 && n > UINT64_MAX / v)
            return snug_fail(err, SNUG_E_OVERFLOW, "'%s': the shape of tensor '%s' overflows", sf->path,
                             escape_text(name).text);
        n *= v;
    }
    *numel = n;
    return SNUG_OK;
}

/* One entry: dtype known, shape whole numbers, offsets [begin, end] inside the data and matching the size. */
static snug_status check_entry(const st_file *sf, const cJSON *t, st_entry *e, snug_error *err) {
    e->name = t->string;
    e->json = t;
    if (!cJSON_IsObject(t))
        return snug_fail(err, SNUG_E_FORMAT, "'%s': entry '%s' is not an object with dtype, shape and "
                         "data_offsets", sf->path, escape_text(e->name).text);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    size_t esize = cJSON_IsString(dtype) ? dtype_size(dtype->valuestring) : 0;
    if (esize == 0 && !cJSON_IsString(dtype))
        return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' has no dtype", sf->path, escape_text(e->name).text);
    if (esize == 0)
        return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' has the unknown dtype %s", sf->path,
                         escape_text(e->name).text, escape_text(dtype->valuestring).text);
    uint64_t numel = 0;
    snug_status s = shape_numel(sf, e->name, cJSON_GetObjectItemCaseSensitive(t, "shape"), &numel, err);
    if (s != SNUG_OK) return s;
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_whole(cJSON_GetArrayItem(offsets, 0), &e->begin) || !json_whole(cJSON_GetArrayItem(offsets, 1), &e->end))
        return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' needs \"data_offsets\": [begin, end], two whole "
                         "numbers", sf->path, escape_text(e->name).text);
    if (e->begin > e->end || e->end > sf->data_len)
        return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' has data offsets [%ju, %ju] outside the %ju data "
                         "bytes of the file (truncated?)", sf->path, escape_text(e->name).text, (uintmax_t)e->begin,
                         (uintmax_t)e->end, (uintmax_t)sf->data_len);
    if (numel > UINT64_MAX / esize || e->end - e->begin != numel * esize)
        return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' spans %ju bytes but its shape and dtype %s need "
                         "%ju", sf->path, escape_text(e->name).text, (uintmax_t)(e->end - e->begin), dtype->valuestring,
                         (uintmax_t)(numel * esize));
    return SNUG_OK;
}

static int by_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The entries sorted by offset tile the data exactly: no overlap, no gap, nothing left over. */
static snug_status check_tiling(st_file *sf, snug_error *err) {
    qsort(sf->entries, sf->n, sizeof *sf->entries, by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < sf->n; i++) {
        const st_entry *e = &sf->entries[i];
        if (e->begin < at)
            return snug_fail(err, SNUG_E_FORMAT, "'%s': tensors '%s' and '%s' overlap (bytes %ju and on)", sf->path,
                             escape_text(sf->entries[i - 1].name).text, escape_text(e->name).text,
                             (uintmax_t)e->begin);
        if (e->begin > at)
            return snug_fail(err, SNUG_E_FORMAT, "'%s': bytes %ju to %ju of the data belong to no tensor (a gap "
                             "before '%s')", sf->path, (uintmax_t)at, (uintmax_t)e->begin, escape_text(e->name).text);
        at = e->end;
    }
    if (at != sf->data_len)
        return snug_fail(err, SNUG_E_FORMAT, "'%s': the tensors cover %ju data bytes but the file holds %ju after "
                         "the header", sf->path, (uintmax_t)at, (uintmax_t)sf->data_len);
    return SNUG_OK;
}

/* Every entry but __metadata__ checked on its own. */
static snug_status check_entries(st_file *sf, snug_error *err) {
    size_t count = (size_t)cJSON_GetArraySize(sf->root);
    sf->entries = calloc(count ? count : 1, sizeof *sf->entries);
    if (!sf->entries) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the tensor list");
    const cJSON *t;
    cJSON_ArrayForEach(t, sf->root) {
        if (strcmp(t->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(t))
                return snug_fail(err, SNUG_E_FORMAT, "'%s': \"__metadata__\" is not an object", sf->path);
            continue;
        }
        for (size_t i = 0; i < sf->n; i++)
            if (strcmp(sf->entries[i].name, t->string) == 0)
                return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' appears twice", sf->path,
                                 escape_text(t->string).text);
        snug_status s = check_entry(sf, t, &sf->entries[sf->n], err);
        if (s != SNUG_OK) return s;
        sf->n++;
    }
    return SNUG_OK;
}

snug_status st_file_open(st_file *sf, const char *path, snug_error *err) {
    memset(sf, 0, sizeof *sf);
    sf->path = path;
    snug_status s = open_file(sf, err);
    if (s == SNUG_OK) s = read_header_len(sf, err);
    if (s == SNUG_OK) s = parse_header(sf, err);
    if (s == SNUG_OK) s = check_entries(sf, err);
    return s;
}

snug_status st_file_check_layout(st_file *sf, snug_error *err) { return check_tiling(sf, err); }

void st_file_close(st_file *sf) {
    if (sf->f) fclose(sf->f);
    cJSON_Delete(sf->root);
    free(sf->entries);
    memset(sf, 0, sizeof *sf);
}

const char *st_metadata(const st_file *sf, const char *key) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(sf->root, "__metadata__");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool st_read_floats(st_file *sf, uint64_t begin, float *v, size_t numel, st_first_bad *bad) {
    *bad = (st_first_bad){.index = numel};
    uint64_t at = 8 + sf->header_len + begin;
    if (at > (uint64_t)INT64_MAX || fseeko(sf->f, (off_t)at, SEEK_SET) != 0) return false;
    unsigned char buf[4096];
    for (size_t done = 0; done < numel;) {
        size_t chunk = numel - done < sizeof buf / 4 ? numel - done : sizeof buf / 4;
        if (fread(buf, 4, chunk, sf->f) != chunk) return false;
        for (size_t i = 0; i < chunk; i++) {
            uint32_t bits = 0;
            for (int b = 0; b < 4; b++) bits |= (uint32_t)buf[4 * i + (size_t)b] << (8 * b);
            float x;
            memcpy(&x, &bits, sizeof bits);
            if (!isfinite(x) && bad->index == numel) *bad = (st_first_bad){.index = done + i, .value = x};
            if (v) v[done + i] = x;
        }
        done += chunk;
    }
    return true;
}

uint64_t st_tensor_begin(const st_file *sf, const char *name) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(sf->root, name);
    uint64_t begin = 0;
    json_whole(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "data_offsets"), 0), &begin);
    return begin;
}
