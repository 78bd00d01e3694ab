/* Data parallelism, the parts a single process can check: the shard arithmetic (contiguous, covering, uneven by
 * at most one, empty shards when B < R), a plain process is rank 0 of 1 without any launcher, the gradient
 * all-reduce happens once per optimizer step whatever the number of micro-batches, and --save's file (format,
 * atomic replacement), and the start-up watchdog (a start-up past its timeout ends the process with status 1 and
 * one line; one that completes in time, or has no timeout, goes on). The runs over 2 and 4 ranks are
 * tests/cli/test_mpi.sh. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/rng.h"
#include "dist/dist.h"
#include "dist/start_watch.h"
#include "snug.h"
#include "test_util.h"

/* Every (n, R): shards in rank order tile [0, n) without gap or overlap, sizes differ by at most one, and rank r
 * starts at floor(r * n / R). */
static void shards_tile_the_batch(void **state) {
    (void)state;
    const size_t ns[] = {0, 1, 2, 3, 7, 31, 32, 33, 64, 1000, 60000};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        for (int R = 1; R <= 9; R++) {
            size_t n = ns[t], next = 0, lo = SIZE_MAX, hi = 0;
            for (int r = 0; r < R; r++) {
                size_t b, len;
                dist_shard(n, r, R, &b, &len);
                assert_int_equal(b, next);
                assert_int_equal(b, (size_t)r * n / (size_t)R);
                next = b + len;
                lo = len < lo ? len : lo;
                hi = len > hi ? len : hi;
            }
            assert_int_equal(next, n);
            assert_true(hi - lo <= 1);
        }
    }
}

static void shards_of_small_and_huge_batches(void **state) {
    (void)state;
    size_t b, len;
    /* B = 3 over 4 ranks: one rank gets nothing and still takes part. */
    dist_shard(3, 0, 4, &b, &len);
    assert_int_equal(len, 0);
    dist_shard(3, 3, 4, &b, &len);
    assert_int_equal(b, 2);
    assert_int_equal(len, 1);
    /* 10 over 4: 2, 3, 2, 3 (floor boundaries 0, 2, 5, 7, 10). */
    const size_t want[4] = {2, 3, 2, 3};
    for (int r = 0; r < 4; r++) {
        dist_shard(10, r, 4, &b, &len);
        assert_int_equal(len, want[r]);
    }
    /* No overflow where r * n would wrap. */
    size_t n = SIZE_MAX - 5;
    dist_shard(n, 2, 3, &b, &len);
    assert_int_equal(b + len, n);
    assert_true(len >= n / 3 && len <= n / 3 + 1);
}

/* Without a launcher the process is rank 0 of 1 and a collective over one rank leaves its data alone. */
static void plain_process_is_a_job_of_one(void **state) {
    (void)state;
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK");
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");
    assert_int_equal(snug_dist_init(NULL, NULL, 600, NULL), SNUG_OK);
    assert_false(snug_dist_joined());
    assert_int_equal(snug_dist_rank(), 0);
    assert_int_equal(snug_dist_size(), 1);
    float f[3] = {1.5f, -2.0f, 3.25f};
    double d = 0.125;
    size_t z[2] = {7, 9};
    assert_int_equal(dist_allreduce_floats(f, 3, 1, NULL), SNUG_OK);
    assert_int_equal(dist_allreduce_doubles(&d, 1, 1, NULL), SNUG_OK);
    assert_int_equal(dist_allreduce_sizes(z, 2, DIST_MAX, 1, NULL), SNUG_OK);
    assert_int_equal(dist_broadcast_floats(f, 3, 1, NULL), SNUG_OK);
    assert_true(f[0] == 1.5f && f[1] == -2.0f && f[2] == 3.25f && d == 0.125 && z[0] == 7 && z[1] == 9);
    snug_dist_finalize();
}

/* A start-up still waiting past its timeout: in a child that never ends it, the watchdog writes one line to stderr
 * that names the process, the timeout and the step, and ends the child with exit status 1. */
static void start_up_past_its_timeout_ends_the_process(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        dup2(fds[1], STDERR_FILENO);
        start_watch w;
        if (start_watch_begin(&w, 0.25, "pid 1 on here", "MPI_Init is still waiting", NULL) != SNUG_OK) _exit(3);
        start_watch_at(&w, "rank 1 of 2 (pid 1 on here)", "the set-up of its communicator is still waiting");
        sleep(30); /* the watchdog ends the child long before */
        _exit(4);
    }
    close(fds[1]);
    char text[1024] = {0};
    size_t got = 0;
    for (ssize_t n; got < sizeof text - 1 && (n = read(fds[0], text + got, sizeof text - 1 - got)) > 0;)
        got += (size_t)n;
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_non_null(strstr(text, "snug: rank 1 of 2 (pid 1 on here): the start-up of the MPI job did not complete "
                                 "within the rank timeout of 0.25 s: the set-up of its communicator is still "
                                 "waiting; check that every rank of the job is running"));
    assert_int_equal(strchr(text, '\n') - text + 1, (ptrdiff_t)got); /* one line */
}

/* Ended in time, the watchdog stops without a word; with no timeout (0) no thread starts at all. */
static void start_up_in_time_goes_on(void **state) {
    (void)state;
    start_watch w;
    assert_int_equal(start_watch_begin(&w, 60, "pid 1 on here", "MPI_Init", NULL), SNUG_OK);
    assert_true(w.running);
    start_watch_at(&w, NULL, "MPI_Comm_dup");
    start_watch_end(&w);
    assert_false(w.running);
    assert_int_equal(start_watch_begin(&w, 0, "pid 1 on here", "MPI_Init", NULL), SNUG_OK);
    assert_false(w.running);
    start_watch_end(&w);
}

static snug_dataset *random_data(size_t n) {
    float *x = malloc(n * 16 * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n * 16; i++) x[i] = snug_rng_uniform(9, 1, i) - 0.5f;
    for (size_t i = 0; i < n; i++) y[i] = (int32_t)snug_rng_below(9, 2, i, 3);
    snug_dataset *ds = NULL;
    assert_int_equal(snug_dataset_from_memory(x, y, n, 1, 4, 4, 3, &ds, NULL), SNUG_OK);
    free(x);
    free(y);
    return ds;
}

static snug_graph *tiny_model(void) {
    snug_graph *g = snug_graph_new("tiny");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 1, 4, 4));
    x = snug_linear(g, "out", snug_relu(g, "act", snug_linear(g, "hidden", x, 8)), 3);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* 50 samples, B = 16 in micro-batches of 3 (k = 6, the last short; the epoch's last window 2 samples): one
 * all-reduce per optimizer step, never one per micro-batch. */
static void one_allreduce_per_step(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_dataset *ds = random_data(50);
    snug_train_config cfg = snug_train_config_default();
    cfg.epochs = 2;
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(g, 16, 3, &cfg, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_allreduce_count(tr), 0);
    size_t idx[16];
    for (size_t i = 0; i < 16; i++) idx[i] = i;
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ds, idx, 16, &st, NULL), SNUG_OK);
    assert_int_equal(st.micro_batches, 6);
    assert_int_equal(snug_trainer_allreduce_count(tr), 1);
    double loss;
    assert_int_equal(snug_trainer_gradients(tr, ds, idx, 16, &loss, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_allreduce_count(tr), 2);
    trainer_done(tr);
    /* A fresh trainer through fit: 2 epochs of ceil(50/16) = 4 steps. */
    assert_int_equal(trainer_simple(g, 16, 3, &cfg, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_allreduce_count(tr), 8);
    assert_true(snug_trainer_allreduce_seconds(tr) >= 0);
    trainer_done(tr);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

static void read_file(const char *path, unsigned char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(*len);
    assert_int_equal(fread(*data, 1, *len, f), *len);
    fclose(f);
}

/* The saved file (safetensors: test_safetensors.c checks the layout) holds the parameter block in graph order,
 * little-endian, after its header; a save that fails leaves no file and no temporary behind. */
static void save_writes_the_parameter_block(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(g, 4, 4, &cfg, &tr, NULL), SNUG_OK);
    char path[] = "/tmp/snug-save-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(snug_trainer_save(tr, path, NULL), SNUG_OK);
    unsigned char *data;
    size_t len, total = 0;
    read_file(path, &data, &len);
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t numel;
        snug_trainer_param(tr, i, &numel, NULL, NULL);
        total += numel;
    }
    uint64_t header = 0;
    for (int b = 0; b < 8; b++) header |= (uint64_t)data[b] << (8 * b);
    assert_int_equal(len, 8 + header + 4 * total);
    assert_int_equal(data[8], '{');
    size_t at = 8 + (size_t)header;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t numel;
        float *v;
        snug_trainer_param(tr, i, &numel, &v, NULL);
        for (size_t j = 0; j < numel; j++, at += 4) {
            uint32_t bits = 0, want;
            for (int b = 0; b < 4; b++) bits |= (uint32_t)data[at + (size_t)b] << (8 * b);
            memcpy(&want, &v[j], 4);
            assert_int_equal(bits, want);
        }
    }
    free(data);
    char tmp[sizeof path + 4];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
    remove(path);
    snug_error err;
    assert_int_equal(snug_trainer_save(tr, "/nonexistent-snug-dir/params.bin", &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "/nonexistent-snug-dir/params.bin.tmp"));
    trainer_done(tr);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shards_tile_the_batch),
        cmocka_unit_test(shards_of_small_and_huge_batches),
        cmocka_unit_test(plain_process_is_a_job_of_one),
        cmocka_unit_test(start_up_past_its_timeout_ends_the_process),
        cmocka_unit_test(start_up_in_time_goes_on),
        cmocka_unit_test(one_allreduce_per_step),
        cmocka_unit_test(save_writes_the_parameter_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
