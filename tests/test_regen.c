/* Regenerated inputs (plan/regen.c): a convolution reading a normalisation's output that nothing else reads
 * takes it in backward from the normalisation, sample by sample, instead of keeping it. The gradients are the
 * same bits as with the output kept, on every convolution path (Winograd, direct, stride 2, pointwise, lowered,
 * grouped) and micro-batch (one sample shared by the threads or split between them, samples per thread); the
 * output dies in forward; nothing regenerates where a recompute or a second reader is involved; the plan
 * holds no overlapping buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "core/mem.h"
#include "core/rng.h"
#include "exec/exec.h"
#include "ops/op.h"
#include "kernels/sgemm.h"
#include "plan/plan.h"
#include "snug.h"
#include "test_util.h"

/* Every convolution path behind a normalisation: c2 Winograd (16 channels on 12x12), c3 pointwise after a
 * GroupNorm with its ReLU, c4 stride 2 after a BatchNorm without one, c5 lowered (5x5), c6 grouped (lowered
 * too), c7 the direct kernel (8 channels). c1 reads the data, and relu7's output has two readers: neither
 * regenerates. */
static snug_graph *regen_model(void) {
    snug_graph *g = snug_graph_new("regen");
    snug_tensor x = snug_input(g, "input", 1, 12, 12);
    x = snug_relu(g, "relu1", snug_batchnorm2d(g, "bn1", snug_conv2d(g, "c1", x, 16, 3, 1, 1), 1e-5f, 0.1f));
    x = snug_relu(g, "relu2", snug_groupnorm(g, "gn2", snug_conv2d(g, "c2", x, 16, 3, 1, 1), 4, 1e-5f));
    x = snug_batchnorm2d(g, "bn3", snug_conv2d(g, "c3", x, 8, 1, 1, 0), 1e-5f, 0.1f);
    x = snug_relu(g, "relu4", snug_batchnorm2d(g, "bn4", snug_conv2d(g, "c4", x, 8, 3, 2, 1), 1e-5f, 0.1f));
    x = snug_relu(g, "relu5", snug_groupnorm(g, "gn5", snug_conv2d(g, "c5", x, 8, 5, 1, 2), 2, 1e-5f));
    x = snug_relu(g, "relu6", snug_batchnorm2d(g, "bn6", snug_conv2d_grouped(g, "c6", x, 8, 3, 1, 1, 2), 1e-5f, 0.1f));
    snug_tensor y = snug_relu(g, "relu7", snug_batchnorm2d(g, "bn7", snug_conv2d(g, "c7", x, 8, 3, 1, 1), 1e-5f, 0.1f));
    y = snug_add(g, "add", y, snug_conv2d(g, "c8", y, 8, 3, 1, 1));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", snug_flatten(g, "flat", y), 5));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* A transformer's products behind LayerNorm and GELU: 20 tokens a sample, so that sgemm takes every dW. */
static snug_graph *token_model(void) {
    snug_graph *g = snug_graph_new("regen-tokens");
    snug_tensor x = snug_embedding(g, "emb", snug_input_tokens(g, "tokens", 20), 11, 16);
    x = snug_linear(g, "fc1", snug_layernorm(g, "ln1", x, 1e-5f), 40);
    x = snug_linear(g, "fc2", snug_gelu(g, "gelu", x), 16);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "head", snug_layernorm(g, "ln2", x, 1e-5f), 11));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static int node_named(const snug_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return i;
    fail_msg("no node %s", name);
    return -1;
}

/* The parameter gradients of one micro-batch of m samples through a plan of variant v: deterministic
 * parameters, data and targets, one forward and backward. */
static float *gradients(const snug_graph *g, size_t m, const plan_variant *v, size_t *arena) {
    snug_optim_config optim = snug_train_config_default().optim;
    plan p;
    assert_int_equal(plan_build(g, m, omp_get_max_threads(), &optim, v, &p, NULL), SNUG_OK);
    int a, b;
    assert_false(plan_find_overlap(&p, &a, &b));
    *arena = p.arena_bytes;
    snug_mem mem;
    snug_mem_init(&mem, 0);
    exec x;
    assert_int_equal(exec_bind(&x, g, &p, &mem, NULL), SNUG_OK);
    for (size_t i = 0; i < g->param_numel; i++) x.params[i] = snug_rng_uniform(5, 1, i) - 0.5f;
    for (size_t i = 0; i < g->state_numel; i++) x.state[i] = 1.0f;
    const size_t in_n = g->tensors[g->nodes[g->input_node].output].numel;
    const bool tokens = strcmp(g->name, "regen-tokens") == 0; /* ids below the vocabulary of 11 */
    for (size_t i = 0; i < m * in_n; i++)
        x.input[i] = tokens ? (float)snug_rng_below(5, 2, i, 11) : snug_rng_uniform(5, 2, i) * 2.0f - 1.0f;
    for (size_t i = 0; i < m * p.targets_per_sample; i++) x.targets[i] = (int32_t)snug_rng_below(5, 3, i, 5);
    const exec_key key = {.seed = 1, .training = true};
    exec_forward(&x, m, &key);
    exec_backward(&x, m, 1.0f / (float)m, &key);
    exec_flush(&x);
    float *grads = malloc(g->param_numel * sizeof *grads);
    memcpy(grads, x.grads, g->param_numel * sizeof *grads);
    exec_unbind(&x);
    snug_mem_release_all(&mem);
    plan_free(&p);
    return grads;
}

/* The same gradient bits with and without regenerating, m = 1 to 3, on both models (the token model's three
 * products all regenerate: after ln1, the GELU and ln2). */
static void same_gradients_with_and_without(void **state) {
    (void)state;
    for (int model = 0; model < 2; model++) {
        snug_graph *g = model ? token_model() : regen_model();
        const plan_variant with = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0});
        plan_variant without = with;
        without.no_regen = true;
        for (size_t m = 1; m <= 3; m++) {
            size_t arena_with, arena_without;
            float *a = gradients(g, m, &with, &arena_with), *b = gradients(g, m, &without, &arena_without);
            printf("# %s m=%zu: activations %zu regenerating, %zu keeping\n", snug_graph_name(g), m, arena_with,
                   arena_without);
            /* the token model's products regenerate only through snug's own product (sgemm_enabled) */
            if (model == 0 || sgemm_enabled()) assert_true(arena_with < arena_without);
            else assert_true(arena_with == arena_without);
            assert_memory_equal(a, b, g->param_numel * sizeof *a);
            free(a);
            free(b);
        }
        snug_graph_free(g);
    }
}

/* Which layers regenerate, and that their inputs die in forward. */
static void regenerates_only_sole_readers(void **state) {
    (void)state;
    snug_graph *g = regen_model();
    snug_optim_config optim = snug_train_config_default().optim;
    plan p;
    const plan_variant v = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0});
    assert_int_equal(plan_build(g, 4, 2, &optim, &v, &p, NULL), SNUG_OK);
    static const char *const yes[] = {"c2", "c3", "c4", "c5", "c6", "c7"}, *const no[] = {"c1", "c8"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        const int n = node_named(g, yes[i]);
        assert_true(p.regen[n]);
        const snug_tensor in = graph_base_tensor(g, g->nodes[n].inputs[0]);
        assert_true(p.bufs[p.value_fwd[in]].last < p.n_forward);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) assert_false(p.regen[node_named(g, no[i])]);
    plan_free(&p);
    snug_graph_free(g);
    g = token_model();
    assert_int_equal(plan_build(g, 2, 2, &optim, &v, &p, NULL), SNUG_OK);
    static const char *const products[] = {"fc1", "fc2", "head"};
    for (size_t i = 0; i < 3; i++) assert_true(p.regen[node_named(g, products[i])] == sgemm_enabled());
    plan_free(&p);
    snug_graph_free(g);
}

/* Under recompute nothing regenerates from a recomputed layer, and every policy's plan is sound. */
static void recompute_and_regen_agree(void **state) {
    (void)state;
    snug_graph *g = regen_model();
    snug_optim_config optim = snug_train_config_default().optim;
    const snug_checkpoint_policy policies[] = {{SNUG_CHECKPOINT_SQRT, 0}, {SNUG_CHECKPOINT_EVERY, 1},
                                               {SNUG_CHECKPOINT_EVERY, 3}, {SNUG_CHECKPOINT_CHEAP, 0}};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        plan p;
        const plan_variant v = plan_variant_of(policies[k]);
        assert_int_equal(plan_build(g, 3, 2, &optim, &v, &p, NULL), SNUG_OK);
        int a, b;
        assert_false(plan_find_overlap(&p, &a, &b));
        for (int n = 0; n < g->n_nodes; n++) {
            if (!p.regen[n]) continue;
            const int producer = g->tensors[graph_base_tensor(g, g->nodes[n].inputs[0])].producer;
            assert_false(p.seg.recompute[n] || p.seg.recompute[producer]);
        }
        plan_free(&p);
    }
    snug_graph_free(g);
}

/* ResNet-20: the first convolution's normalised output of each of its 9 blocks. */
static void resnet20_regenerates_each_block(void **state) {
    (void)state;
    snug_graph *g = model_named("resnet20", NULL);
    assert_non_null(g);
    snug_optim_config optim = snug_train_config_default().optim;
    plan p, q;
    plan_variant v = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0});
    assert_int_equal(plan_build(g, 8, 2, &optim, &v, &p, NULL), SNUG_OK);
    v.no_regen = true;
    assert_int_equal(plan_build(g, 8, 2, &optim, &v, &q, NULL), SNUG_OK);
    int count = 0;
    for (int n = 0; n < g->n_nodes; n++) count += p.regen[n];
    printf("# resnet20 m=8: %d regenerated inputs, activations %zu -> %zu\n", count, q.arena_bytes, p.arena_bytes);
    assert_int_equal(count, 9);
    assert_true((double)p.arena_bytes < 0.85 * (double)q.arena_bytes);
    plan_free(&p);
    plan_free(&q);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_gradients_with_and_without),
        cmocka_unit_test(regenerates_only_sole_readers),
        cmocka_unit_test(recompute_and_regen_agree),
        cmocka_unit_test(resnet20_regenerates_each_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
