/* The trainer the weights and state targets load files into, and the seed writer's: a small model with every
 * kind of tensor a file holds (convolution and linear weights, BatchNorm's parameters and running statistics),
 * SGD with momentum (one optimizer slot), over ten samples in memory. The fuzz targets and
 * tests/fuzz/make_seeds.c make it the same way, so that the seeds' names, shapes and run settings are the
 * trainer's. */
#ifndef SNUG_TESTS_FUZZ_TRAINER_H
#define SNUG_TESTS_FUZZ_TRAINER_H

#include "fuzz_util.h"

#include "core/crc32c.h"
#include "io/safetensors.h"

#define FUZZ_SAMPLES 10
#define FUZZ_BATCH 4

static const char fuzz_model_text[] =
    "[model]\nname = fuzz\ninput = image 2 4 4\n"
    "[conv]\ntype = conv2d\nout_channels = 3\nkernel = 3\npadding = 1\n"
    "[bn]\ntype = batchnorm2d\n"
    "[act]\ntype = relu\n"
    "[flat]\ntype = flatten\n"
    "[fc]\ntype = linear\nout = 3\n"
    "[loss]\ntype = softmax_cross_entropy\n";

typedef struct fuzz_trainer {
    snug_graph *g;
    snug_plan *plan;
    snug_trainer *tr;
    snug_dataset *data;
    snug_train_config cfg;
} fuzz_trainer;

static inline snug_train_config fuzz_train_config(void) {
    snug_train_config c = snug_train_config_default();
    c.epochs = 2;
    c.max_steps = 5;
    c.seed = 7;
    c.optim.lr = 0.01f;
    return c;
}

static inline void fuzz_trainer_free(fuzz_trainer *f) {
    snug_trainer_free(f->tr);
    snug_plan_free(f->plan);
    snug_graph_free(f->g);
    snug_dataset_free(f->data);
    memset(f, 0, sizeof *f);
}

/* Aborts when the trainer cannot be made: the harness itself is broken then. */
static inline void fuzz_trainer_new(fuzz_trainer *f) {
    snug_error err = {0};
    memset(f, 0, sizeof *f);
    f->cfg = fuzz_train_config();
    static float x[FUZZ_SAMPLES * 2 * 4 * 4];
    static int32_t y[FUZZ_SAMPLES];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = (float)(i % 13) / 6.0f - 1.0f;
    for (int i = 0; i < FUZZ_SAMPLES; i++) y[i] = i % 3;
    snug_plan_request req = snug_plan_request_default(FUZZ_BATCH);
    req.optim = f->cfg.optim;
    req.threads = 1;
    if (snug_model_parse(fuzz_model_text, "fuzz.ini", &f->g, &err) != SNUG_OK ||
        snug_plan_new(f->g, &req, &f->plan, NULL, &err) != SNUG_OK ||
        snug_trainer_new(f->plan, &f->cfg, &f->tr, &err) != SNUG_OK ||
        snug_dataset_from_memory(x, y, FUZZ_SAMPLES, 2, 4, 4, 3, &f->data, &err) != SNUG_OK) {
        fprintf(stderr, "fuzz: cannot make the trainer: %s\n", err.message);
        abort();
    }
}

/* Where a safetensors header carries snug's checksum ("crc32c":"<8 hex digits>"), writes the checksum of the
 * file as it now is, so that a mutated state reaches the checks behind the checksum. */
static inline void fuzz_fix_state_crc(uint8_t *p, size_t len) {
    static const char field[] = "\"" ST_CRC_KEY "\":\"";
    if (len < 8) return;
    uint64_t header_len = 0;
    for (int i = 0; i < 8; i++) header_len |= (uint64_t)p[i] << (8 * i);
    if (header_len > len - 8) return;
    const uint8_t *header = p + 8;
    size_t at = 0;
    for (;; at++) {
        if (at + sizeof field - 1 > header_len) return;
        if (memcmp(header + at, field, sizeof field - 1) == 0) break;
    }
    at += sizeof field - 1;
    if (at + 8 > header_len) return;
    uint32_t crc = crc32c_update(0, p, 8);
    crc = crc32c_update(crc, header, at);
    crc = crc32c_update(crc, "00000000", 8);
    crc = crc32c_update(crc, header + at + 8, (size_t)(len - 8 - at - 8));
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", crc);
    memcpy(p + 8 + at, hex, 8);
}

/* Writes the fuzz input to `path`, its checksum made right where it carries one (fuzz_fix_state_crc). */
static inline void fuzz_write_checksummed(const char *path, const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) abort();
    memcpy(copy, data, size);
    fuzz_fix_state_crc(copy, size);
    fuzz_write(path, copy, size);
    free(copy);
}

#endif
