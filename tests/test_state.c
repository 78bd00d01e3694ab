/* The training state (snug_trainer_save_state, snug_state_latest, snug_trainer_load_state): a run stopped after
 * any step and continued from its state ends with the bits of the run that was not stopped (SGD with momentum and
 * AdamW, dropout and BatchNorm, shuffled epochs, a short last window); with another micro-batch it ends within
 * rounding; damaged and foreign states are skipped or refused with their reason, the trainer left as it was; the
 * folder keeps the newest states; a state file is also a weights file. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>

#include "snug.h"
#include "test_util.h"

enum { N = 44, C = 2, H = 6, W = 6, CLASSES = 3, BATCH = 8, STEPS = 12 };

static snug_dataset *data(void) {
    snug_dataset *ds = pattern_images(N, C, H, W, CLASSES);
    assert_non_null(ds);
    return ds;
}

/* conv - BatchNorm - ReLU - dropout - linear: running statistics, a dropout mask keyed by the step, momentum. */
static snug_graph *model(const char *name, size_t hidden) {
    snug_graph *g = snug_graph_new(name);
    snug_tensor x = snug_input(g, "input", C, H, W);
    x = snug_relu(g, "act", snug_batchnorm2d(g, "bn", snug_conv2d(g, "conv", x, 4, 3, 1, 1), 1e-5f, 0.1f));
    x = snug_dropout(g, "drop", snug_flatten(g, "flat", x), 0.2f);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", snug_linear(g, "hid", x, hidden), CLASSES));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

typedef struct run_spec {
    snug_optim_kind optim;
    size_t micro_batch;
    long stop_after;      /* set the stop flag at this step (0: never) */
    const char *dir;
    snug_precision precision;
    snug_augment augment;
    size_t prefetch;      /* micro-batches read ahead */
    snug_products products; /* what multiplies the linear layers (AUTO unless set) */
} run_spec;

static volatile sig_atomic_t stop_flag;
static long stop_at;

static bool on_step(const snug_step_stats *st, void *user) {
    (void)user;
    if (stop_at && st->step == stop_at) stop_flag = 1;
    return true;
}

static snug_train_config config(const run_spec *r) {
    snug_train_config c = snug_train_config_default();
    c.epochs = 3;             /* 6 windows an epoch, the last of 4 samples */
    c.max_steps = STEPS + 3;  /* a cap inside the third epoch */
    c.seed = 5;
    c.optim.kind = r->optim;
    c.optim.lr = r->optim == SNUG_OPTIM_ADAMW ? 3e-3f : 0.05f;
    c.optim.weight_decay = 1e-3f;
    c.schedule.kind = SNUG_SCHEDULE_COSINE;
    c.schedule.warmup_steps = 2;
    c.state_dir = r->dir;
    c.state_every = 4;
    c.progress = on_step;
    c.stop = &stop_flag;
    c.augment = r->augment;
    return c;
}

static snug_trainer *trainer(const snug_graph *g, const run_spec *r) {
    snug_train_config c = config(r);
    snug_plan_request req = request_for(BATCH, r->micro_batch, NO_CHECKPOINT, 0, &c);
    req.precision = r->precision;
    req.prefetch = r->prefetch;
    req.products = r->products;
    snug_trainer *tr = NULL;
    snug_error err;
    if (trainer_for(g, &req, &c, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    return tr;
}

static float *snapshot(const snug_trainer *tr, size_t *total) {
    size_t n = 0, numel;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        snug_trainer_param(tr, i, &numel, NULL, NULL);
        n += numel;
    }
    float *all = malloc(n * sizeof *all), *v;
    size_t at = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        snug_trainer_param(tr, i, &numel, &v, NULL);
        memcpy(all + at, v, numel * sizeof *v);
        at += numel;
    }
    *total = n;
    return all;
}

static char *make_dir(void) {
    char *d = strdup("/tmp/snug-state-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void remove_dir(char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

/* The whole run, uninterrupted. */
static float *full_run(const snug_graph *g, const snug_dataset *ds, run_spec r, size_t *n) {
    r.dir = NULL, r.stop_after = 0;
    stop_flag = 0, stop_at = 0;
    snug_trainer *tr = trainer(g, &r);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    float *p = snapshot(tr, n);
    trainer_done(tr);
    return p;
}

/* The run stopped after `stop` steps (its state written), then continued by a new trainer from the folder's newest
 * state with micro-batch m2. */
static float *stopped_run(const snug_graph *g, const snug_dataset *ds, run_spec r, long stop, size_t m2, size_t *n) {
    char *dir = make_dir();
    r.dir = dir;
    stop_flag = 0, stop_at = stop;
    snug_trainer *tr = trainer(g, &r);
    snug_error err;
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_E_INTERRUPTED);
    trainer_done(tr);
    stop_flag = 0, stop_at = 0;
    snug_state_info info;
    assert_int_equal(snug_state_latest(dir, &info, &err), SNUG_OK);
    assert_int_equal(info.step, stop);
    assert_string_equal(info.skipped, "");
    r.micro_batch = m2;
    tr = trainer(g, &r);
    if (snug_trainer_load_state(tr, info.path, &err) != SNUG_OK) fail_msg("%s", err.message);
    snug_state_info_free(&info);
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_OK);
    float *p = snapshot(tr, n);
    trainer_done(tr);
    remove_dir(dir);
    return p;
}

/* Writes run r's state after `stop` steps, then has a trainer of `other` load it: refused, its message holding
 * `expected`. */
static void state_refused(const snug_graph *g, const snug_dataset *ds, run_spec r, long stop, run_spec other,
                          const char *expected) {
    char *dir = make_dir();
    r.dir = other.dir = dir;
    stop_flag = 0, stop_at = stop;
    snug_trainer *tr = trainer(g, &r);
    snug_error err;
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_E_INTERRUPTED);
    trainer_done(tr);
    stop_flag = 0, stop_at = 0;
    snug_state_info info;
    assert_int_equal(snug_state_latest(dir, &info, &err), SNUG_OK);
    assert_int_equal(info.precision, r.precision);
    tr = trainer(g, &other);
    assert_int_equal(snug_trainer_load_state(tr, info.path, &err), SNUG_E_ARG);
    printf("# %s\n", err.message);
    assert_non_null(strstr(err.message, expected));
    trainer_done(tr);
    snug_state_info_free(&info);
    remove_dir(dir);
}

/* Stopped after every step from 1 to the end (the last window of an epoch, a state just written, the cap), with
 * either optimizer: the bits of the uninterrupted run. */
static void resume_is_bitwise(void **state) {
    (void)state;
    snug_dataset *ds = data();
    snug_graph *g = model("state", 8);
    for (int o = 0; o < 2; o++) {
        const run_spec r = {.optim = o ? SNUG_OPTIM_ADAMW : SNUG_OPTIM_SGD, .micro_batch = 3};
        size_t n, m;
        float *want = full_run(g, ds, r, &n);
        for (long stop = 1; stop < STEPS + 3; stop += o ? 3 : 1) {
            float *got = stopped_run(g, ds, r, stop, 3, &m);
            assert_int_equal(n, m);
            if (memcmp(want, got, n * sizeof *want) != 0) fail_msg("optimizer %d stopped after step %ld: not bitwise", o, stop);
            free(got);
        }
        free(want);
    }
    snug_graph_free(g);
    snug_dataset_free(ds);
}

/* bf16: a stopped run continues with the bits of the uninterrupted one (every value it keeps is float32, the
 * packed activations live within a step), with the products left to snug and with each of the two asked for
 * (snug's own: bgemm on every CPU, through its portable kernel where AVX512_BF16 is missing; the BLAS); a
 * float32 trainer refuses its state, naming the precision. */
static void bf16_resume_is_bitwise_and_keeps_its_precision(void **state) {
    (void)state;
    snug_dataset *ds = data();
    snug_graph *g = model("state", 8);
    run_spec r = {.optim = SNUG_OPTIM_ADAMW, .micro_batch = 3, .precision = SNUG_PRECISION_BF16};
    static const snug_products asked[] = {SNUG_PRODUCTS_SNUG, SNUG_PRODUCTS_BLAS, SNUG_PRODUCTS_AUTO};
    for (size_t k = 0; k < sizeof asked / sizeof asked[0]; k++) {
        r.products = asked[k];
        size_t n, m;
        float *want = full_run(g, ds, r, &n);
        for (long stop = 2; stop < STEPS + 3; stop += 5) {
            float *got = stopped_run(g, ds, r, stop, 3, &m);
            assert_int_equal(n, m);
            if (memcmp(want, got, n * sizeof *want) != 0)
                fail_msg("bf16 (products %s) stopped after step %ld: not bitwise", snug_products_name(r.products), stop);
            free(got);
        }
        free(want);
    }
    run_spec fp32 = r;
    fp32.precision = SNUG_PRECISION_FP32;
    state_refused(g, ds, r, 4, fp32, "precision differs (bf16 in the state, fp32 in this run)");
    snug_graph_free(g);
    snug_dataset_free(ds);
}

/* Augmented and read ahead: a stopped run replays the same augmentations (drawn from seed, epoch and sample) and
 * ends with the bits of the uninterrupted one; a run without reading ahead has those bits too; a trainer with
 * other augmentations refuses the state, naming them. */
static void augmented_resume_is_bitwise(void **state) {
    (void)state;
    snug_dataset *ds = data();
    snug_graph *g = model("state", 8);
    const run_spec r = {.optim = SNUG_OPTIM_SGD, .micro_batch = 3, .prefetch = 2,
                        .augment = {.flip = true, .crop_pad = 2, .brightness = 0.3f, .contrast = 0.3f}};
    run_spec plain = r, on_demand = r;
    plain.augment = (snug_augment){0};
    on_demand.prefetch = 0;
    size_t n, m;
    float *want = full_run(g, ds, r, &n), *none = full_run(g, ds, plain, &m), *direct = full_run(g, ds, on_demand, &m);
    assert_memory_not_equal(want, none, n * sizeof *want); /* the augmentation changed the run */
    assert_memory_equal(want, direct, n * sizeof *want);
    for (long stop = 1; stop < STEPS + 3; stop += 4) {
        float *got = stopped_run(g, ds, r, stop, 3, &m);
        if (memcmp(want, got, n * sizeof *want) != 0) fail_msg("augmented, stopped after step %ld: not bitwise", stop);
        free(got);
    }
    run_spec other = r;
    other.augment.crop_pad = 3;
    state_refused(g, ds, r, 3, other, "flip,crop:2,brightness:0.3,contrast:0.3 in the state, "
                                      "flip,crop:3,brightness:0.3,contrast:0.3 in this run");
    free(want), free(none), free(direct);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

/* Continued with another micro-batch: the same run within rounding (BatchNorm aside, whose statistics are the
 * micro-batch's: this model's are then another run's, so it is left out here). */
static void resume_with_another_micro_batch(void **state) {
    (void)state;
    snug_dataset *ds = data();
    snug_graph *g = snug_graph_new("plain");
    snug_tensor x = snug_dropout(g, "drop", snug_flatten(g, "flat", snug_input(g, "input", C, H, W)), 0.2f);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", snug_relu(g, "act", snug_linear(g, "hid", x, 16)), CLASSES));
    const run_spec r = {.optim = SNUG_OPTIM_SGD, .micro_batch = 8};
    size_t n, m;
    float *want = full_run(g, ds, r, &n), *got = stopped_run(g, ds, r, 7, 3, &m);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(want[i] - got[i])), scale = fmax(scale, fabs(want[i]));
    printf("# another micro-batch after step 7: max |a-b| / max |a| = %.3g\n", worst / scale);
    assert_true(worst / scale <= 1e-5);
    free(want), free(got);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, at, at < 0 ? SEEK_END : SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, -1, SEEK_CUR), 0);
    fputc(c ^ 0x20, f);
    fclose(f);
}

static void truncate_to(const char *path, long len) { assert_int_equal(truncate(path, len), 0); }

/* Damaged newest states are skipped, each named with what is wrong, and the newest whole one is used; a state of
 * another model or run is refused and changes nothing; an empty or missing folder says so. */
static void damaged_states_are_skipped(void **state) {
    (void)state;
    snug_dataset *ds = data();
    snug_graph *g = model("state", 8);
    char *dir = make_dir();
    run_spec r = {.optim = SNUG_OPTIM_SGD, .micro_batch = 4, .dir = dir};
    stop_flag = 0, stop_at = 0;
    snug_train_config c = config(&r);
    c.state_every = 1;
    c.state_keep = 4;
    c.max_steps = 4;
    const snug_plan_request req = request_for(BATCH, 4, NO_CHECKPOINT, 0, &c);
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_for(g, &req, &c, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    trainer_done(tr);
    snug_state_info info;
    snug_error err;
    assert_int_equal(snug_state_latest(dir, &info, &err), SNUG_OK);
    assert_int_equal(info.step, 4);
    char newest[4096];
    snprintf(newest, sizeof newest, "%s", info.path);
    snug_state_info_free(&info);

    char paths[3][4200];
    for (int k = 0; k < 3; k++) snprintf(paths[k], sizeof paths[k], "%s/state-%012d.safetensors", dir, 4 - k);
    flip_byte(paths[0], -5);     /* the data of the newest */
    flip_byte(paths[1], 20);     /* the header of the next */
    truncate_to(paths[2], 100);  /* the third cut short */
    assert_int_equal(snug_state_latest(dir, &info, &err), SNUG_OK);
    assert_int_equal(info.step, 1);
    assert_non_null(strstr(info.skipped, "checksum does not match"));
    assert_non_null(strstr(info.skipped, paths[0]));
    assert_non_null(strstr(info.skipped, paths[2]));
    snug_state_info_free(&info);
    assert_int_equal(snug_state_read(newest, &info, &err), SNUG_E_FORMAT);

    /* another model's state: refused, the trainer untouched */
    snug_graph *other = model("other", 8);
    tr = NULL;
    assert_int_equal(trainer_for(other, &req, &c, &tr, NULL), SNUG_OK);
    size_t n0, n1;
    float *before = snapshot(tr, &n0);
    snprintf(newest, sizeof newest, "%s/state-%012d.safetensors", dir, 1);
    assert_int_equal(snug_trainer_load_state(tr, newest, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "is a state of model 'state', not of 'other'"));
    float *after = snapshot(tr, &n1);
    assert_memory_equal(before, after, n0 * sizeof *before);
    free(before), free(after);
    trainer_done(tr);
    /* another run's settings: named */
    snug_train_config c2 = c;
    c2.optim.lr = 0.5f;
    assert_int_equal(trainer_for(g, &req, &c2, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_load_state(tr, newest, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "optim.lr differs (0.05 in the state, 0.5 in this run)"));
    /* a state is a weights file too */
    assert_int_equal(snug_trainer_load(tr, newest, &err), SNUG_OK);
    trainer_done(tr);
    snug_graph_free(other);

    for (int k = 0; k < 4; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/state-%012d.safetensors", dir, 1 + k);
        truncate_to(p, 0);
    }
    assert_int_equal(snug_state_latest(dir, &info, &err), SNUG_E_FORMAT);
    assert_non_null(strstr(err.message, "no valid training state"));
    remove_dir(dir);
    assert_int_equal(snug_state_latest("/nonexistent-snug-dir", &info, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "holds no training state"));
    snug_graph_free(g);
    snug_dataset_free(ds);
}

/* The folder keeps the newest state_keep states and no temporary file; a folder that cannot be written is an
 * error that says so. */
static void folder_keeps_the_newest(void **state) {
    (void)state;
    snug_dataset *ds = data();
    snug_graph *g = model("state", 8);
    char *dir = make_dir();
    run_spec r = {.optim = SNUG_OPTIM_SGD, .micro_batch = 8, .dir = dir};
    stop_flag = 0, stop_at = 0;
    snug_train_config c = config(&r);
    c.state_every = 1;
    c.state_keep = 2;
    const snug_plan_request req = request_for(BATCH, 8, NO_CHECKPOINT, 0, &c);
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_for(g, &req, &c, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 2", dir);
    assert_int_equal(system(cmd), 0);
    char file[4200];
    snprintf(file, sizeof file, "%s/blocker", dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    snug_error err;
    assert_int_equal(snug_trainer_save_state(tr, file, 2, NULL, NULL, 0, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "is not a folder"));
    trainer_done(tr);
    remove_dir(dir);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

/* A full disk during a state write (a file size limit makes write(2) fail the way ENOSPC does): the error says
 * the disk may be full and that the newest state is intact; that state still loads, and no temporary file is
 * left behind. */
static void full_disk_keeps_the_previous_state(void **state) {
    (void)state;
    snug_dataset *ds = data();
    snug_graph *g = model("state", 8);
    char *dir = make_dir();
    run_spec r = {.optim = SNUG_OPTIM_ADAMW, .micro_batch = 8, .dir = dir};
    stop_flag = 0, stop_at = 0;
    snug_train_config c = config(&r);
    c.max_steps = 4;
    const snug_plan_request req = request_for(BATCH, 8, NO_CHECKPOINT, 0, &c);
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_for(g, &req, &c, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    snug_state_info before;
    snug_error err;
    assert_int_equal(snug_state_latest(dir, &before, &err), SNUG_OK);

    /* A few more steps, then a state write that cannot finish. */
    c.max_steps = 7;
    c.state_dir = NULL;
    snug_trainer *more = NULL;
    assert_int_equal(trainer_for(g, &req, &c, &more, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_load_state(more, before.path, &err), SNUG_OK);
    assert_int_equal(snug_trainer_fit(more, ds, NULL), SNUG_OK);
    struct rlimit was, small = {.rlim_cur = 256, .rlim_max = RLIM_INFINITY};
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
    small.rlim_max = was.rlim_max;
    void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    const snug_status s = snug_trainer_save_state(more, dir, 2, NULL, NULL, 0, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
    signal(SIGXFSZ, old);
    assert_int_equal(s, SNUG_E_IO);
    assert_non_null(strstr(err.message, "is the disk full?"));
    assert_non_null(strstr(err.message, "is intact"));
    assert_non_null(strstr(err.message, before.path));

    snug_state_info after;
    assert_int_equal(snug_state_latest(dir, &after, &err), SNUG_OK);
    assert_string_equal(after.path, before.path);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s' | grep tmp)\"", dir);
    assert_int_equal(system(cmd), 0);
    snug_state_info_free(&before);
    snug_state_info_free(&after);
    trainer_done(more);
    trainer_done(tr);
    remove_dir(dir);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resume_is_bitwise),
        cmocka_unit_test(augmented_resume_is_bitwise),
        cmocka_unit_test(resume_with_another_micro_batch),
        cmocka_unit_test(bf16_resume_is_bitwise_and_keeps_its_precision),
        cmocka_unit_test(damaged_states_are_skipped),
        cmocka_unit_test(folder_keeps_the_newest),
        cmocka_unit_test(full_disk_keeps_the_previous_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
