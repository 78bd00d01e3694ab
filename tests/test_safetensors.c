/* Weights as safetensors: snug_trainer_save writes the documented layout (8-byte length, space-padded JSON
 * header aligned to 8, F32 tensors contiguous in graph order, BatchNorm buffers included, a tied weight once),
 * snug_trainer_load reads it back bit for bit, and every malformed or mismatched file is refused with its own
 * message while the parameters stay as they were: truncated at every offset, bad header lengths, bad JSON,
 * offsets out of range, overlapping or leaving gaps, unknown dtypes, missing and extra names, other shapes. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snug.h"
#include "test_util.h"

/* ---- models and trainers ---- */

/* conv -> BatchNorm -> ReLU -> linear: parameters and non-trainable buffers. */
static snug_graph *bn_model(void) {
    snug_graph *g = snug_graph_new("bn");
    snug_tensor x = snug_input(g, "input", 1, 4, 4);
    x = snug_conv2d(g, "conv", x, 2, 3, 1, 1);
    x = snug_relu(g, "relu", snug_batchnorm2d(g, "bn", x, 1e-5f, 0.1f));
    x = snug_linear(g, "fc", snug_flatten(g, "flat", x), 3);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* A token model whose output head reuses the embedding's weight. */
static snug_graph *tied_model(void) {
    snug_graph *g = snug_graph_new("tied");
    snug_tensor x = snug_embedding(g, "wte", snug_input_tokens(g, "input", 4), 16, 8);
    x = snug_layernorm(g, "ln", x, 1e-5f);
    snug_softmax_cross_entropy(g, "loss", snug_linear_tied(g, "head", x, "wte"));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* input (1, 1, 2) -> fc (2 -> 2): fc.weight (2, 2) is data bytes [0, 16), fc.bias (2) [16, 24). */
static snug_graph *lin_model(void) {
    snug_graph *g = snug_graph_new("lin");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 1, 1, 2));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", x, 2));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_trainer *seeded_trainer(snug_graph *g, uint64_t seed) {
    snug_train_config cfg = snug_train_config_default();
    cfg.seed = seed;
    cfg.optim.momentum = 0;
    snug_trainer *tr = NULL;
    snug_error err;
    if (trainer_simple(g, 2, 2, &cfg, &tr, &err) != SNUG_OK) fail_msg("snug_trainer_new: %s", err.message);
    return tr;
}

/* Every value of every tensor, parameters and buffers, in graph order (a fresh copy). */
static float *snapshot(const snug_trainer *tr, size_t *total) {
    size_t n = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t numel;
        snug_trainer_param(tr, i, &numel, NULL, NULL);
        n += numel;
    }
    float *all = malloc(n * sizeof *all + 1), *at = all;
    assert_non_null(all);
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t numel;
        float *v;
        snug_trainer_param(tr, i, &numel, &v, NULL);
        memcpy(at, v, numel * sizeof *v);
        at += numel;
    }
    *total = n;
    return all;
}

/* Gives every value (buffers too) a distinct, seed-dependent value, so nothing matches by accident. */
static void scribble(snug_trainer *tr, float base) {
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t numel;
        float *v;
        snug_trainer_param(tr, i, &numel, &v, NULL);
        for (size_t j = 0; j < numel; j++) v[j] = base + 0.25f * (float)i + 0.001f * (float)j;
    }
}

/* ---- files ---- */

static char *temp_path(const char *tag) {
    char *path = malloc(64);
    assert_non_null(path);
    snprintf(path, 64, "/tmp/snug-st-%s-%ld", tag, (long)getpid());
    return path;
}

static void write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* A file with header length `declared`, the hl bytes of header, and data_len data bytes (1, 2, 3, ...). */
static void write_st_n(const char *path, uint64_t declared, const char *header, size_t hl, size_t data_len) {
    size_t len = 8 + hl + data_len;
    unsigned char *b = malloc(len);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(declared >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (unsigned char)(i + 1);
    write_bytes(path, b, len);
    free(b);
}

static void write_st_declared(const char *path, uint64_t declared, const char *header, size_t data_len) {
    write_st_n(path, declared, header, strlen(header), data_len);
}

static void write_st(const char *path, const char *header, size_t data_len) {
    write_st_declared(path, strlen(header), header, data_len);
}

/* ---- expectations ---- */

/* Loading path into tr fails with status and a message containing every phrase (NULL-terminated list), and
 * leaves every value as it was. */
static void expect_refused(snug_trainer *tr, const char *path, snug_status status, ...) {
    size_t n0, n1;
    float *before = snapshot(tr, &n0);
    snug_error err = {0};
    snug_status s = snug_trainer_load(tr, path, &err);
    if (s != status) fail_msg("status %d (%s), expected %d", s, err.message, status);
    va_list ap;
    va_start(ap, status);
    for (const char *phrase; (phrase = va_arg(ap, const char *));)
        if (!strstr(err.message, phrase)) fail_msg("message lacks '%s': %s", phrase, err.message);
    va_end(ap);
    float *after = snapshot(tr, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0 * sizeof(float));
    free(before);
    free(after);
}

#define FC_W "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"
#define FC_B "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}"

/* ---- tests ---- */

static void round_trip_is_bitwise(void **state) {
    (void)state;
    snug_graph *g = bn_model();
    snug_trainer *a = seeded_trainer(g, 1), *b = seeded_trainer(g, 2);
    scribble(a, 1.0f);
    char *path = temp_path("rt");
    assert_int_equal(snug_trainer_save(a, path, NULL), SNUG_OK);
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
    snug_error err = {0};
    if (snug_trainer_load(b, path, &err) != SNUG_OK) fail_msg("load: %s", err.message);
    size_t na, nb;
    float *va = snapshot(a, &na), *vb = snapshot(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(va, vb, na * sizeof(float));
    free(va), free(vb), remove(path), free(path);
    trainer_done(a), trainer_done(b), snug_graph_free(g);
}

/* Reads the header of path: its length (checked: 8-byte aligned data, space padding) and its text. */
static char *header_of(const unsigned char *b, size_t len, size_t *hl) {
    assert_true(len >= 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)b[i] << (8 * i);
    assert_true(n <= len - 8);
    assert_int_equal((8 + n) % 8, 0);
    char *text = malloc(n + 1);
    memcpy(text, b + 8, n);
    text[n] = '\0';
    size_t used = strlen(text);
    while (used > 0 && text[used - 1] == ' ') used--;
    assert_true(n - used < 8);  /* at most 7 spaces of padding */
    assert_int_equal(text[used - 1], '}');
    *hl = (size_t)n;
    return text;
}

/* The layout, read by hand: every tensor under its name with dtype, shape and contiguous offsets in graph
 * order, the data little-endian; metadata strings. */
static void layout_is_safetensors(void **state) {
    (void)state;
    snug_graph *g = bn_model();
    snug_trainer *tr = seeded_trainer(g, 3);
    scribble(tr, -2.0f);
    char *path = temp_path("layout");
    assert_int_equal(snug_trainer_save(tr, path, NULL), SNUG_OK);
    size_t len, hl;
    unsigned char *b = read_bytes(path, &len);
    char *h = header_of(b, len, &hl);
    assert_non_null(strstr(h, "\"__metadata__\":{\"format\":\"pt\""));
    assert_non_null(strstr(h, "\"model\":\"bn\""));
    static const char *const want[] = {
        "\"conv.weight\":{\"dtype\":\"F32\",\"shape\":[2,1,3,3],\"data_offsets\":[0,72]}",
        "\"conv.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[72,80]}",
        "\"bn.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[80,88]}",
        "\"bn.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[88,96]}",
        "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[96,104]}",
        "\"bn.running_var\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[104,112]}",
        "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[3,32],\"data_offsets\":[112,496]}",
        "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[496,508]}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(h, want[i])) fail_msg("header lacks %s: %s", want[i], h);
    assert_int_equal(len, 8 + hl + 508);
    size_t n;
    float *v = snapshot(tr, &n);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = 0, expect;
        for (int k = 0; k < 4; k++) bits |= (uint32_t)b[8 + hl + 4 * i + (size_t)k] << (8 * k);
        memcpy(&expect, &v[i], 4);
        assert_int_equal(bits, expect);
    }
    free(v), free(h), free(b), remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

/* The tied head declares no parameter: the embedding is written once, and loads back. */
static void tied_weight_written_once(void **state) {
    (void)state;
    snug_graph *g = tied_model();
    snug_trainer *a = seeded_trainer(g, 1), *b = seeded_trainer(g, 2);
    char *path = temp_path("tied");
    assert_int_equal(snug_trainer_save(a, path, NULL), SNUG_OK);
    size_t len, hl;
    unsigned char *bytes = read_bytes(path, &len);
    char *h = header_of(bytes, len, &hl);
    assert_non_null(strstr(h, "\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[16,8],\"data_offsets\":[0,512]}"));
    assert_null(strstr(h, "head"));
    assert_int_equal(len, 8 + hl + (16 * 8 + 8 + 8) * 4);
    assert_int_equal(snug_trainer_load(b, path, NULL), SNUG_OK);
    size_t na, nb;
    float *va = snapshot(a, &na), *vb = snapshot(b, &nb);
    assert_memory_equal(va, vb, na * sizeof(float));
    free(va), free(vb), free(h), free(bytes), remove(path), free(path);
    trainer_done(a), trainer_done(b), snug_graph_free(g);
}

/* A save that cannot be written says where, and leaves no temporary behind. */
static void save_failure_is_reported(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    snug_error err;
    assert_int_equal(snug_trainer_save(tr, "/nonexistent-snug-dir/w.safetensors", &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "/nonexistent-snug-dir/w.safetensors.tmp"));
    trainer_done(tr), snug_graph_free(g);
}

/* The hand-written reference file loads: the format as written by others (keys in any order, spaces). */
static void hand_written_file_loads(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("hand");
    /* data bytes 1, 2, 3, ...: fc.weight[0] is the little-endian float with bytes 01 02 03 04 */
    write_st(path, "{ " FC_B ", " FC_W ", \"__metadata__\": {\"a\": \"b\"},"
                   " \"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]} }   ", 32);
    snug_error err = {0};
    if (snug_trainer_load(tr, path, &err) != SNUG_OK) fail_msg("load: %s", err.message);
    float *w;
    snug_trainer_param(tr, 0, NULL, &w, NULL);
    uint32_t bits;
    memcpy(&bits, &w[0], 4);
    assert_int_equal(bits, 0x04030201u);
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

static void short_files_and_bad_lengths(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("len");
    expect_refused(tr, "/nonexistent-snug-dir/w.safetensors", SNUG_E_IO, "cannot open", NULL);
    expect_refused(tr, "/tmp", SNUG_E_IO, "not a regular file", NULL);
    write_bytes(path, "", 0);
    expect_refused(tr, path, SNUG_E_FORMAT, "shorter than the 8-byte header length", NULL);
    write_bytes(path, "\x10\x00\x00", 3);
    expect_refused(tr, path, SNUG_E_FORMAT, "shorter than the 8-byte header length", NULL);
    write_st_declared(path, 0, "", 0);
    expect_refused(tr, path, SNUG_E_FORMAT, "header length 0 is out of range", NULL);
    write_st_declared(path, (uint64_t)1 << 40, "{}", 0);
    expect_refused(tr, path, SNUG_E_FORMAT, "out of range", NULL);
    write_st_declared(path, UINT64_MAX, "{}", 0);
    expect_refused(tr, path, SNUG_E_FORMAT, "out of range", NULL);
    write_st_declared(path, 200, "{" FC_W "," FC_B "}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "the header length says 200 bytes", "truncated", NULL);
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

static void bad_json(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("json");
    write_st(path, "{\"fc.weight\":", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "not valid JSON", NULL);
    write_st(path, "{" FC_W "," FC_B "}xyz", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "not valid JSON", NULL);
    write_st(path, "[1, 2, 3]", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "not an object of tensors", NULL);
    write_st_n(path, 8, "{}\0     ", 8, 0);
    expect_refused(tr, path, SNUG_E_FORMAT, "NUL byte", NULL);
    write_st(path, "{\"__metadata__\":[]," FC_W "," FC_B "}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "\"__metadata__\" is not an object", NULL);
    write_st(path, "{\"fc.weight\":3," FC_B "}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "entry 'fc.weight' is not an object", NULL);
    write_st(path, "{" FC_W "," FC_W "," FC_B "}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "'fc.weight' appears twice", NULL);
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

static void bad_entries(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("entry");
    static const struct { const char *weight, *phrase; snug_status status; } cases[] = {
        {"{\"shape\":[2,2],\"data_offsets\":[0,16]}", "has no dtype", SNUG_E_FORMAT},
        {"{\"dtype\":\"F33\",\"shape\":[2,2],\"data_offsets\":[0,16]}", "unknown dtype F33", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"data_offsets\":[0,16]}", "no \"shape\" list", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}",
         "shape entry that is not a whole number", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,\"2\"],\"data_offsets\":[0,16]}",
         "shape entry that is not a whole number", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2]}", "needs \"data_offsets\"", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0]}", "needs \"data_offsets\"", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16,24]}", "needs \"data_offsets\"", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0.5,16]}", "needs \"data_offsets\"", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[-8,16]}", "needs \"data_offsets\"", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,0]}", "outside the 24 data bytes", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,40]}", "outside the 24 data bytes", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,1e300]}", "needs \"data_offsets\"", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}",
         "spans 16 bytes but its shape and dtype F32 need 24", SNUG_E_FORMAT},
        {"{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,16]}", "overflows",
         SNUG_E_OVERFLOW},
    };
    char header[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(header, sizeof header, "{\"fc.weight\":%s," FC_B "}", cases[i].weight);
        write_st(path, header, 24);
        expect_refused(tr, path, cases[i].status, cases[i].phrase, NULL);
    }
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

static void offsets_must_tile_the_data(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("tile");
    write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                   "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "overlap", NULL);
    write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                   "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}", 32);
    expect_refused(tr, path, SNUG_E_FORMAT, "bytes 16 to 24 of the data belong to no tensor", NULL);
    write_st(path, "{" FC_W "," FC_B "}", 40);
    expect_refused(tr, path, SNUG_E_FORMAT, "cover 24 data bytes but the file holds 40", NULL);
    write_st(path, "{" FC_W "," FC_B "}", 20);
    expect_refused(tr, path, SNUG_E_FORMAT, "outside the 20 data bytes", NULL);
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

static void names_dtypes_and_shapes_must_match(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("names");
    write_st(path, "{" FC_W "}", 16);
    expect_refused(tr, path, SNUG_E_FORMAT, "does not hold the weights of model 'lin'", "1 missing ('fc.bias')",
                   NULL);
    write_st(path, "{" FC_W "," FC_B ",\"fc2.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}", 32);
    expect_refused(tr, path, SNUG_E_FORMAT, "1 not in the model ('fc2.bias')", NULL);
    write_st(path, "{" FC_W ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "1 missing ('fc.bias'); 1 not in the model ('b')", NULL);
    write_st(path, "{" FC_W ",\"fc.bias\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[16,24]}}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "tensor 'fc.bias' is F16; snug loads F32 only", NULL);
    write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[4,1],\"data_offsets\":[0,16]}," FC_B "}", 24);
    expect_refused(tr, path, SNUG_E_SHAPE, "tensor 'fc.weight' has shape [4, 1] in the file but [2, 2] in model 'lin'",
                   NULL);
    write_st(path, "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2,2],\"data_offsets\":[0,16]}," FC_B "}", 24);
    expect_refused(tr, path, SNUG_E_SHAPE, "has shape [1, 1, 1, 1, 2]... in the file", NULL);
    /* names come before the byte accounting: a file whose header lost a tensor (its bytes still there), or that
     * lists another model's tensors over a gap, names what is missing rather than counting bytes */
    write_st(path, "{" FC_W "}", 24);
    expect_refused(tr, path, SNUG_E_FORMAT, "1 missing ('fc.bias')", NULL);
    write_st(path, "{" FC_W ",\"conv.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}", 32);
    expect_refused(tr, path, SNUG_E_FORMAT, "1 missing ('fc.bias'); 1 not in the model ('conv.bias')", NULL);
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

/* Another model's file: the first few missing and extra names, and how many more. */
static void another_models_file_lists_names(void **state) {
    (void)state;
    snug_graph *bn = bn_model(), *tied = tied_model();
    snug_trainer *a = seeded_trainer(bn, 1), *b = seeded_trainer(tied, 1);
    char *path = temp_path("other");
    assert_int_equal(snug_trainer_save(a, path, NULL), SNUG_OK);
    expect_refused(b, path, SNUG_E_FORMAT, "3 missing ('wte.weight', 'ln.weight', 'ln.bias')",
                   "8 not in the model ('conv.weight', 'conv.bias', 'bn.weight', 'bn.bias' and 4 more)", NULL);
    remove(path), free(path);
    trainer_done(a), trainer_done(b), snug_graph_free(bn), snug_graph_free(tied);
}

/* A file of lin_model's two tensors holding these 6 floats (fc.weight 4, fc.bias 2), little-endian. */
static void write_lin_values(const char *path, const float v[6]) {
    const char *header = "{" FC_W "," FC_B "}";
    const size_t hl = strlen(header);
    unsigned char b[8 + 128 + 24];
    assert_true(hl <= 128);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (int k = 0; k < 6; k++) {
        uint32_t bits;
        memcpy(&bits, &v[k], 4);
        for (int i = 0; i < 4; i++) b[8 + hl + 4 * (size_t)k + (size_t)i] = (unsigned char)(bits >> (8 * i));
    }
    write_bytes(path, b, 8 + hl + 24);
}

/* A NaN or an infinity anywhere is refused (SNUG_E_NONFINITE) with the tensor and the first bad index, and
 * nothing is loaded, not even the tensors before it; finite extremes load. */
static void non_finite_values_are_refused(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("nonfinite");
    float v[6] = {1, 2, NAN, 4, 5, 6};
    write_lin_values(path, v);
    expect_refused(tr, path, SNUG_E_NONFINITE, "tensor 'fc.weight'", "index 2", "NaN", NULL);
    v[2] = 3, v[5] = -INFINITY, v[4] = INFINITY;
    write_lin_values(path, v);
    expect_refused(tr, path, SNUG_E_NONFINITE, "tensor 'fc.bias'", "index 0", "infinity", NULL);
    v[4] = FLT_MAX, v[5] = -FLT_MIN / 2; /* finite: the largest float, a subnormal */
    write_lin_values(path, v);
    snug_error err = {0};
    if (snug_trainer_load(tr, path, &err) != SNUG_OK) fail_msg("load: %s", err.message);
    float *b;
    snug_trainer_param(tr, 1, NULL, &b, NULL);
    assert_true(b[0] == FLT_MAX && b[1] == -FLT_MIN / 2);
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

/* Every byte of a message is printable ASCII: nothing from the file reaches the terminal as a control byte. */
static void assert_printable(const char *message) {
    for (const unsigned char *c = (const unsigned char *)message; *c; c++)
        if (*c < 0x20 || *c > 0x7e) fail_msg("byte 0x%02x at %td of: %s", *c, (const char *)c - message, message);
}

/* Loading path is refused with status and a printable message that holds phrase. */
static void expect_escaped(snug_trainer *tr, const char *path, snug_status status, const char *phrase) {
    snug_error err = {0};
    assert_int_equal(snug_trainer_load(tr, path, &err), status);
    assert_printable(err.message);
    if (!strstr(err.message, phrase)) fail_msg("message lacks '%s': %s", phrase, err.message);
}

/* Names and dtypes from the header reach messages escaped (\xNN, a backslash doubled): a tensor called
 * "\u001b[2J" would otherwise clear the reader's screen. */
static void file_text_in_messages_is_escaped(void **state) {
    (void)state;
    snug_graph *g = lin_model();
    snug_trainer *tr = seeded_trainer(g, 1);
    char *path = temp_path("escape");
    write_st(path, "{" FC_W "," FC_B ",\"\\u001b[2J\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}", 32);
    expect_escaped(tr, path, SNUG_E_FORMAT, "1 not in the model ('\\x1b[2J')");
    write_st(path, "{" FC_W "," FC_B ",\"a\xff\\\\b\x7f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}",
             32);
    expect_escaped(tr, path, SNUG_E_FORMAT, "('a\\xff\\\\b\\x7f')");
    write_st(path, "{\"fc.weight\":{\"dtype\":\"F\\u001b]0;pwned\\u0007\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                   FC_B "}", 24);
    expect_escaped(tr, path, SNUG_E_FORMAT, "unknown dtype F\\x1b]0;pwned\\x07");
    write_st(path, "{\"fc.weight\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                   "\"\\u009b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 24);
    expect_escaped(tr, path, SNUG_E_FORMAT, "('\\xc2\\x9b')");
    write_st(path, "{\"\\r\":3}", 24);
    expect_escaped(tr, path, SNUG_E_FORMAT, "entry '\\x0d' is not an object");
    write_st(path, "{\"x\":{\"\x1b[2J", 24);
    expect_escaped(tr, path, SNUG_E_FORMAT, "not valid JSON");
    remove(path), free(path);
    trainer_done(tr), snug_graph_free(g);
}

/* Every proper prefix of a valid file is refused (and nothing crashes or changes); so is every single-byte
 * corruption of the header that makes it invalid, and none crashes. */
static void truncated_at_every_offset(void **state) {
    (void)state;
    snug_graph *g = bn_model();
    snug_trainer *a = seeded_trainer(g, 1), *b = seeded_trainer(g, 2);
    char *path = temp_path("fuzz"), *cut = temp_path("cut");
    assert_int_equal(snug_trainer_save(a, path, NULL), SNUG_OK);
    size_t len;
    unsigned char *bytes = read_bytes(path, &len);
    for (size_t n = 0; n < len; n++) {
        write_bytes(cut, bytes, n);
        size_t n0, n1;
        float *before = snapshot(b, &n0);
        snug_error err = {0};
        snug_status s = snug_trainer_load(b, cut, &err);
        if (s != SNUG_E_FORMAT) fail_msg("a file cut at %zu of %zu bytes: status %d (%s)", n, len, s, err.message);
        float *after = snapshot(b, &n1);
        assert_memory_equal(before, after, n0 * sizeof(float));
        free(before), free(after);
    }
    static const unsigned char noise[] = {'{', '}', '"', ',', ':', '[', '9', '-', 'e', 0, 0xff};
    size_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (size_t)bytes[i] << (8 * i);
    for (size_t at = 0; at < 8 + hl; at++) {
        unsigned char keep = bytes[at];
        for (size_t k = 0; k < sizeof noise; k++) {
            bytes[at] = noise[k];
            write_bytes(cut, bytes, len);
            snug_error err = {0};
            snug_status s = snug_trainer_load(b, cut, &err);
            assert_true(s == SNUG_OK || err.message[0] != '\0');
        }
        bytes[at] = keep;
    }
    free(bytes), remove(path), remove(cut), free(path), free(cut);
    trainer_done(a), trainer_done(b), snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_is_bitwise),
        cmocka_unit_test(layout_is_safetensors),
        cmocka_unit_test(tied_weight_written_once),
        cmocka_unit_test(save_failure_is_reported),
        cmocka_unit_test(hand_written_file_loads),
        cmocka_unit_test(short_files_and_bad_lengths),
        cmocka_unit_test(bad_json),
        cmocka_unit_test(bad_entries),
        cmocka_unit_test(offsets_must_tile_the_data),
        cmocka_unit_test(names_dtypes_and_shapes_must_match),
        cmocka_unit_test(another_models_file_lists_names),
        cmocka_unit_test(file_text_in_messages_is_escaped),
        cmocka_unit_test(non_finite_values_are_refused),
        cmocka_unit_test(truncated_at_every_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
