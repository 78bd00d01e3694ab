/* The machine's memory and the plans it cannot hold: control-group limits are read as cgroup v1 and v2 lay them
 * out (from folders built like /proc and /sys), a plan over what the machine offers is refused with its figures
 * and the way out that can work (figures given here, so that any machine tests every branch), and a trainer
 * refuses a plan larger than this very machine before it reserves a byte. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/machine.h"
#include "snug.h"
#include "test_util.h"

#define GIB ((size_t)1 << 30)

/* Writes text into root/path, making its folders. */
static void put(const char *root, const char *path, const char *text) {
    char name[512];
    snprintf(name, sizeof name, "%s/%s", root, path);
    for (char *p = name + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(name, 0700);
        *p = '/';
    }
    FILE *f = fopen(name, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *fresh_root(void) {
    static char root[64];
    snprintf(root, sizeof root, "/tmp/snug-machine.XXXXXX");
    assert_non_null(mkdtemp(root));
    return root;
}

static void remove_root(const char *root) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

/* v2 alone: the tightest memory.max from the group up; "max" is no limit; a parent's limit binds. */
static void reads_cgroup_v2(void **state) {
    (void)state;
    char *root = fresh_root();
    put(root, "proc/self/cgroup", "0::/jobs/run7\n");
    put(root, "sys/fs/cgroup/jobs/run7/memory.max", "max\n");
    assert_int_equal(machine_cgroup_limit(root), 0);
    put(root, "sys/fs/cgroup/jobs/memory.max", "8589934592\n");
    assert_int_equal(machine_cgroup_limit(root), 8 * GIB);
    put(root, "sys/fs/cgroup/jobs/run7/memory.max", "2147483648\n");
    assert_int_equal(machine_cgroup_limit(root), 2 * GIB);
    remove_root(root);
    /* in a container's cgroup namespace the group is "/" and its limit sits at the hierarchy's root */
    root = fresh_root();
    put(root, "proc/self/cgroup", "0::/\n");
    put(root, "sys/fs/cgroup/memory.max", "536870912\n");
    assert_int_equal(machine_cgroup_limit(root), GIB / 2);
    remove_root(root);
}

/* v1: the memory controller's line among the others (alone or joined with others), its "unlimited" (LONG_MAX
 * rounded to a page), a container mounted at its own group where the host's path does not exist, and v2's
 * hierarchy mounted beside v1 as "unified". */
static void reads_cgroup_v1(void **state) {
    (void)state;
    char *root = fresh_root();
    put(root, "proc/self/cgroup", "9:name=systemd:/\n5:cpu,memory:/docker/abc\n0::/\n");
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(machine_cgroup_limit(root), 0);
    put(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "3221225472\n");
    assert_int_equal(machine_cgroup_limit(root), 3 * GIB);
    put(root, "sys/fs/cgroup/unified/memory.max", "1073741824\n");
    assert_int_equal(machine_cgroup_limit(root), GIB);
    remove_root(root);
    root = fresh_root();
    put(root, "proc/self/cgroup", "4:memory:/docker/abc\n");
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "4294967296\n");
    assert_int_equal(machine_cgroup_limit(root), 4 * GIB);
    remove_root(root);
    /* nothing to read: no limit */
    assert_int_equal(machine_cgroup_limit("/nonexistent-snug-root"), 0);
}

static void this_machine_has_memory(void **state) {
    (void)state;
    snug_machine_memory m;
    snug_machine_memory_get(&m);
    assert_true(m.physical > 0);
    assert_true(m.usable > 0 && m.usable <= m.physical);
    assert_true(m.usable == (m.cgroup && m.cgroup < m.physical ? m.cgroup : m.physical));
}

/* input (1, 1, in) -> linear(out) -> loss over `out` classes: parameters (in + 1) * out. */
static snug_graph *wide_model(size_t in, size_t out) {
    snug_graph *g = snug_graph_new("wide");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 1, 1, in));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", x, out));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_plan *plan_of(const snug_graph *g, size_t batch, float momentum) {
    snug_train_config cfg = snug_train_config_default();
    cfg.optim.momentum = momentum;
    const snug_plan_request req = request_for(batch, batch, NO_CHECKPOINT, 0, &cfg);
    snug_plan *p = NULL;
    assert_int_equal(snug_plan_new(g, &req, &p, NULL, NULL), SNUG_OK);
    return p;
}

static snug_plan_summary summary_of(const snug_plan *p) {
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    return s;
}

static void expect_in(const char *text, const char *part) {
    if (!strstr(text, part)) fail_msg("'%s' is not in: %s", part, text);
}

/* Activations dominate: the figures by category, the machine's, and the micro-batch as the way out. */
static void refuses_activations_over_the_machine(void **state) {
    (void)state;
    snug_graph *g = wide_model(1024, 4096);
    snug_plan *p = plan_of(g, 2048, 0.9f);
    const snug_plan_summary s = summary_of(p);
    const size_t fixed = s.bytes[SNUG_MEM_PARAMS] + s.bytes[SNUG_MEM_GRADS] + s.bytes[SNUG_MEM_OPTIM];
    assert_true(s.total - fixed > fixed); /* the micro-batch's share is the larger */
    snug_machine_memory m = {.physical = s.total, .cgroup = 0, .usable = s.total};
    snug_error err = {0};
    assert_int_equal(snug_plan_check_machine(p, &m, &err), SNUG_OK); /* exactly what it needs fits */
    m = (snug_machine_memory){.physical = 64 * GIB, .cgroup = fixed + (s.total - fixed) / 2};
    m.usable = m.cgroup;
    assert_int_equal(snug_plan_check_machine(p, &m, &err), SNUG_E_OOM);
    char need[32], offers[32];
    snug_format_bytes(s.total, need, sizeof need);
    snug_format_bytes(m.usable, offers, sizeof offers);
    expect_in(err.message, "out of memory: this plan needs ");
    expect_in(err.message, need);
    expect_in(err.message, "(params ");
    expect_in(err.message, "activations ");
    expect_in(err.message, "this process's control group allows (of 64.00 GiB of physical memory)");
    expect_in(err.message, "shrinks with a smaller micro-batch or checkpointing");
    expect_in(err.message, "at micro-batch 2048");
    expect_in(err.message, offers);
    assert_null(strstr(err.message, "--")); /* the library names no flag */
    snug_plan_free(p);
    snug_graph_free(g);
}

/* The parameters, gradients and optimizer state alone are over: no micro-batch helps; an optimizer with less
 * state does when the model itself fits, a smaller model when it does not. */
static void refuses_fixed_blocks_over_the_machine(void **state) {
    (void)state;
    snug_graph *g = wide_model(1024, 4096);
    snug_plan *p = plan_of(g, 1, 0.9f);
    const snug_plan_summary s = summary_of(p);
    const size_t model = s.bytes[SNUG_MEM_PARAMS] + s.bytes[SNUG_MEM_GRADS];
    snug_machine_memory m = {.physical = model + s.bytes[SNUG_MEM_OPTIM] / 2, .cgroup = 0};
    m.usable = m.physical;
    snug_error err = {0};
    assert_int_equal(snug_plan_check_machine(p, &m, &err), SNUG_E_OOM);
    expect_in(err.message, "of physical memory of this machine");
    expect_in(err.message, "no smaller micro-batch or checkpointing lowers them");
    expect_in(err.message, "SGD without momentum keeps none");
    m.physical = m.usable = model / 2;
    assert_int_equal(snug_plan_check_machine(p, &m, &err), SNUG_E_OOM);
    expect_in(err.message, "no smaller micro-batch or checkpointing lowers them");
    expect_in(err.message, "train a smaller model");
    assert_null(strstr(err.message, "SGD without momentum"));
    m.usable = 0; /* unknown: nothing to check against */
    assert_int_equal(snug_plan_check_machine(p, &m, &err), SNUG_OK);
    snug_plan_free(p);
    snug_graph_free(g);
}

/* A plan whose parameters alone are twice this machine's memory: refused before anything is reserved (the
 * trainer would otherwise zero block after block until the kernel killed it). A budget far larger than the
 * machine changes nothing: only what the plan reserves counts. */
static void trainer_refuses_a_plan_larger_than_this_machine(void **state) {
    (void)state;
    snug_machine_memory m;
    snug_machine_memory_get(&m);
    const size_t in = 1 << 16, out = 2 * (m.usable / sizeof(float)) / in + 1;
    snug_graph *g = wide_model(in, out);
    snug_train_config cfg = snug_train_config_default();
    cfg.optim.momentum = 0;
    const snug_plan_request req = request_for(1, 1, NO_CHECKPOINT, SIZE_MAX / 2, &cfg);
    snug_trainer *tr = NULL;
    snug_error err = {0};
    assert_int_equal(trainer_for(g, &req, &cfg, &tr, &err), SNUG_E_OOM);
    assert_null(tr);
    expect_in(err.message, "out of memory: this plan needs ");
    expect_in(err.message, "train a smaller model");
    /* the same model, small: runs under the same huge budget */
    snug_graph *small = wide_model(16, 4);
    const snug_plan_request small_req = request_for(8, 8, NO_CHECKPOINT, SIZE_MAX / 2, &cfg);
    assert_int_equal(trainer_for(small, &small_req, &cfg, &tr, &err), SNUG_OK);
    trainer_done(tr);
    snug_graph_free(small);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_cgroup_v2),
        cmocka_unit_test(reads_cgroup_v1),
        cmocka_unit_test(this_machine_has_memory),
        cmocka_unit_test(refuses_activations_over_the_machine),
        cmocka_unit_test(refuses_fixed_blocks_over_the_machine),
        cmocka_unit_test(trainer_refuses_a_plan_larger_than_this_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
