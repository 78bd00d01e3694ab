/* The planner: no two buffers live at the same step share bytes, for every model, micro-batch and policy;
 * what a trainer reserves is the plan to the byte; checkpointing cuts memory on a deep chain; gradients are
 * bitwise equal with and without recompute (dropout and normalisations included); the cheap policy replays only
 * cheap layers and saves memory where it can; AUTO never exceeds its budget; an impossible budget is one message
 * with the smallest budget that fits; whole-model gradients through fan-out (the executor's first writers
 * write activation gradients whole, the others add) match finite differences. The first four run again in bf16
 * (the same promises with outputs packed between forward and backward), and the reservation and recompute once
 * more with the linear layers' products through bgemm asked for (on every CPU). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "kernels/conv3x3_bf16.h"
#include "ops/op.h"
#include "plan/plan.h"
#include "snug.h"
#include "test_util.h"

/* How the plans here compute: float32, the products left to snug. */
#define FP32_AUTO plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO)

static const snug_checkpoint_policy NONE = {SNUG_CHECKPOINT_NONE, 0}, SQRT = {SNUG_CHECKPOINT_SQRT, 0},
                                    AUTO = {SNUG_CHECKPOINT_AUTO, 0}, CHEAP = {SNUG_CHECKPOINT_CHEAP, 0};

/* The precision the tests below plan and train in, and the products they ask for (set by the group's setup):
 * bf16 with snug's own products asked for takes bgemm on every CPU (its portable kernel where the CPU, or
 * test_plan_portable's cap, lacks AVX512_BF16). */
static snug_precision precision = SNUG_PRECISION_FP32;
static snug_products products = SNUG_PRODUCTS_AUTO;
static bool grads_packed = false; /* bf16 plans planned again with every gradient the ops take packed */
static int in_bf16(void **state) { (void)state; precision = SNUG_PRECISION_BF16; return 0; }
static int in_bf16_grads(void **state) { grads_packed = true; return in_bf16(state); }
static int in_bf16_own(void **state) { products = SNUG_PRODUCTS_SNUG; return in_bf16(state); }
static int in_fp32(void **state) {
    (void)state;
    precision = SNUG_PRECISION_FP32;
    products = SNUG_PRODUCTS_AUTO;
    grads_packed = false;
    return 0;
}

/* snug_plan_new's plan of req, planned again with packed gradients wherever the ops take them (grads_packed:
 * plan_variant.grad_packing_anyway) so that the tests below reach those paths at their small sizes. */
static snug_plan *plan_in(const snug_graph *g, const snug_plan_request *req) {
    snug_plan *sp;
    assert_int_equal(snug_plan_new(g, req, &sp, NULL, NULL), SNUG_OK);
    if (!grads_packed) return sp;
    plan_variant v = sp->p.variant;
    v.no_packing = v.no_grad_packing = false;
    v.grad_packing_anyway = true;
    plan q;
    assert_int_equal(plan_build(g, sp->p.m, sp->p.threads, &req->optim, &v, &q, NULL), SNUG_OK);
    assert_true(plan_add_beside(&q, sp->p.data_set_bytes, sp->p.runtime_bytes, sp->p.ring_slots));
    plan_free(&sp->p);
    sp->p = q;
    sp->request.budget = 0; /* AUTO's choice under its budget, with the gradients packed on top: over it */
    return sp;
}

/* A trainer of plan_in's plan. */
static snug_status trainer_in(const snug_graph *g, const snug_plan_request *req, const snug_train_config *cfg,
                              snug_trainer **tr, snug_error *err) {
    snug_plan *sp = plan_in(g, req);
    const snug_status s = snug_trainer_new(sp, cfg, tr, err);
    if (s != SNUG_OK) snug_plan_free(sp);
    return s;
}

static snug_plan_request request_in(size_t batch, size_t m, snug_checkpoint_policy pol, size_t budget,
                                    const snug_train_config *cfg) {
    snug_plan_request r = request_for(batch, m, pol, budget, cfg);
    r.precision = precision;
    r.products = products;
    return r;
}

/* A residual chain with dropout, blocks x + dropout(fc2(relu(fc1(x)))) with a 4x wider hidden layer as in a
 * transformer's MLP: what checkpointing must get exactly right (crossing tensors, replayed masks). */
static snug_graph *residual_model(int blocks) {
    snug_graph *g = snug_graph_new("residual");
    snug_tensor x = snug_linear(g, "in", snug_flatten(g, "flat", snug_input(g, "input", 1, 6, 5)), 24);
    for (int b = 0; b < blocks; b++) {
        char name[5][32];
        static const char *const part[5] = {"fc1", "relu", "fc2", "drop", "add"};
        for (int i = 0; i < 5; i++) snprintf(name[i], 32, "b%d.%s", b, part[i]);
        snug_tensor h = snug_relu(g, name[1], snug_linear(g, name[0], x, 96));
        h = snug_dropout(g, name[3], snug_linear(g, name[2], h, 24), 0.25f);
        x = snug_add(g, name[4], x, h);
    }
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", x, 5));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* Convolutions with BatchNorm, GroupNorm, ReLU, dropout, a residual add, max-pooling and a concatenation, then
 * LayerNorm and GELU between linear layers: every layer the cheap policy may replay, next to the ones it must
 * keep. */
static snug_graph *norm_model(void) {
    snug_graph *g = snug_graph_new("norms");
    snug_tensor a = snug_relu(g, "relu1", snug_batchnorm2d(g, "bn1", snug_conv2d(g, "conv1", snug_input(g, "input", 1, 6, 5), 4, 3, 1, 1), 1e-5f, 0.1f));
    snug_tensor b = snug_relu(g, "relu2", snug_groupnorm(g, "gn2", snug_conv2d(g, "conv2", a, 4, 3, 1, 1), 2, 1e-5f));
    b = snug_add(g, "add", a, snug_dropout(g, "drop", b, 0.25f));
    b = snug_maxpool2d(g, "pool", b, 2, 2);
    b = snug_relu(g, "relu3", snug_batchnorm2d(g, "bn3", snug_conv2d(g, "conv3", b, 6, 3, 1, 1), 1e-5f, 0.1f));
    /* a UNet-style concatenation: replayed from conv4's output, which is then kept instead of the whole */
    b = snug_concat(g, "cat", snug_conv2d(g, "conv4", b, 2, 3, 1, 1), b);
    snug_tensor h = snug_layernorm(g, "ln", snug_linear(g, "fc1", snug_flatten(g, "flat", b), 12), 1e-5f);
    h = snug_gelu(g, "gelu", snug_linear(g, "fc2", h, 16));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", h, 5));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

#define N_MODELS 4

static snug_graph *model(int i) {
    if (i == 2) return residual_model(7);
    if (i == 3) return norm_model();
    snug_graph *g = model_named(i == 0 ? "mlp" : "cnn", NULL);
    assert_non_null(g);
    return g;
}

static void check_no_overlap(const plan *p, const char *what) {
    int a, b;
    if (plan_find_overlap(p, &a, &b))
        fail_msg("%s: buffers %d and %d overlap (offsets %zu+%zu, %zu+%zu; steps %d-%d, %d-%d)", what, a, b,
                 p->bufs[a].offset, p->bufs[a].bytes, p->bufs[b].offset, p->bufs[b].bytes, p->bufs[a].first,
                 p->bufs[a].last, p->bufs[b].first, p->bufs[b].last);
    assert_true(p->live_peak <= p->arena_bytes);
}

static void offsets_never_overlap(void **state) {
    (void)state;
    snug_optim_config optim = snug_train_config_default().optim;
    for (int i = 0; i < N_MODELS; i++) {
        snug_graph *g = model(i);
        static const size_t ms[] = {1, 3, 8};
        for (size_t k = 0; k < 3; k++)
            for (size_t every = 0; every <= 5; every++)
                for (int sel = 0; sel < 2; sel++) {
                    plan_variant v = {every ? (snug_checkpoint_policy){SNUG_CHECKPOINT_EVERY, every} : NONE,
                                      sel == 1, every == 4 ? 1 : -1, every == 5 ? 1 : 0, k == 0, k == 1,
                                      precision == SNUG_PRECISION_BF16, false,
                                      plan_compute_of(precision, products).product, false, grads_packed};
                    plan p;
                    assert_int_equal(plan_build(g, ms[k], 2, &optim, &v, &p, NULL), SNUG_OK);
                    char what[96];
                    snprintf(what, sizeof what, "%s m=%zu every=%zu selective=%d", snug_graph_name(g), ms[k], every, sel);
                    check_no_overlap(&p, what);
                    plan_free(&p);
                }
        for (size_t k = 0; k < 3; k++) {
            plan p;
            plan_variant v = plan_variant_of(CHEAP);
            plan_variant_compute(&v, plan_compute_of(precision, products));
            assert_int_equal(plan_build(g, ms[k], 2, &optim, &v, &p, NULL), SNUG_OK);
            check_no_overlap(&p, "cheap");
            plan_free(&p);
        }
        snug_graph_free(g);
    }
}

/* The trainer holds exactly what snug_plan_new predicts, for every model, policy and micro-batch. */
static void reserved_equals_planned(void **state) {
    (void)state;
    static const snug_checkpoint_policy policies[] = {{SNUG_CHECKPOINT_NONE, 0}, {SNUG_CHECKPOINT_SQRT, 0},
                                                      {SNUG_CHECKPOINT_EVERY, 2}, {SNUG_CHECKPOINT_CHEAP, 0}};
    for (int i = 0; i < N_MODELS; i++) {
        snug_graph *g = model(i);
        for (size_t m = 1; m <= 16; m *= 4)
            for (int k = 0; k < 4; k++) {
                snug_train_config cfg = snug_train_config_default();
                const snug_plan_request req = request_in(16, m, policies[k], 0, &cfg);
                snug_trainer *tr;
                assert_int_equal(trainer_in(g, &req, &cfg, &tr, NULL), SNUG_OK);
                snug_plan *sp = plan_in(g, &req);
                snug_plan_summary s;
                snug_plan_summarize(sp, &s);
                snug_mem_report rep;
                snug_trainer_memory(tr, &rep);
                assert_memory_equal(rep.in_use, s.bytes, sizeof rep.in_use);
                assert_int_equal(rep.peak, s.total);
                snug_plan_free(sp);
                trainer_done(tr);
            }
        snug_graph_free(g);
    }
}

/* The plan's peak is one figure from one source: summary.peak and its place are the largest step of the
 * timeline (snug_plan_step, what the timeline draws and the table's row reports), the buffer rows live at that
 * step add up to it category by category, the activation rows fill the arena exactly, and the workspace the
 * steps hold reaches what the plan reserves. */
static void check_peak_agrees(const snug_plan *sp, const char *what) {
    snug_plan_summary s;
    snug_plan_summarize(sp, &s);
    size_t peak = 0, at = 0, workspace = 0, n = snug_plan_step_count(sp);
    for (size_t i = 0; i < n; i++) {
        snug_plan_step_info st;
        snug_plan_step(sp, i, &st);
        size_t total = 0;
        for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++) total += st.bytes[c];
        if (total > peak) peak = total, at = i;
        if (st.bytes[SNUG_MEM_WORKSPACE] > workspace) workspace = st.bytes[SNUG_MEM_WORKSPACE];
    }
    snug_plan_step_info st;
    snug_plan_step(sp, at, &st);
    if (s.peak != peak || s.peak_step != at || strcmp(s.peak_op, st.layer) != 0 || s.peak_phase != st.phase)
        fail_msg("%s: the summary's peak %zu at step %zu (%s %s), the timeline's %zu at step %zu (%s %s)", what,
                 s.peak, s.peak_step, s.peak_op, snug_phase_name(s.peak_phase), peak, at, st.layer,
                 snug_phase_name(st.phase));
    assert_int_equal(workspace, s.bytes[SNUG_MEM_WORKSPACE]);
    size_t rows[SNUG_MEM_NCATEGORIES] = {0}, arena_end = 0;
    for (size_t i = 0; i < snug_plan_buffer_count(sp); i++) {
        snug_plan_buffer_info b;
        snug_plan_buffer(sp, i, &b);
        if (b.category == SNUG_MEM_ACTIVATIONS && b.offset + b.bytes > arena_end) arena_end = b.offset + b.bytes;
        if (!b.in_place && b.first_step <= at && at <= b.last_step) rows[b.category] += b.bytes;
    }
    for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++)
        if (rows[c] != st.bytes[c])
            fail_msg("%s: the %s rows live at the peak's step add up to %zu, the step holds %zu", what,
                     snug_mem_category_name((snug_mem_category)c), rows[c], st.bytes[c]);
    assert_int_equal(arena_end, s.activation_peak);
}

/* Zoo models at their benchmark batches, each at two budgets derived from its own plans: the whole batch's plan
 * without checkpointing (it fits as it is), and 60% of it (a smaller micro-batch or recompute). */
static void peak_is_one_figure(void **state) {
    (void)state;
    static const struct { const char *name; size_t batch; } zoo[] = {
        {"cnn", 64}, {"resnet20", 128}, {"unet", 8}, {"gpt", 8}, {"unet-hires", 4}, {"resnet50", 32}};
    for (size_t z = 0; z < sizeof zoo / sizeof zoo[0]; z++) {
        snug_graph *g;
        assert_int_equal(snug_model_builtin(zoo[z].name, &g, NULL), SNUG_OK);
        snug_train_config cfg = snug_train_config_default();
        snug_plan_request req = request_in(zoo[z].batch, zoo[z].batch, NONE, 0, &cfg);
        snug_plan *sp;
        assert_int_equal(snug_plan_new(g, &req, &sp, NULL, NULL), SNUG_OK);
        snug_plan_summary full;
        snug_plan_summarize(sp, &full);
        snug_plan_free(sp);
        for (int k = 0; k < 2; k++) {
            req = request_in(zoo[z].batch, SNUG_MICRO_BATCH_AUTO, AUTO, k ? full.total / 10 * 6 : full.total, &cfg);
            snug_plan_shortfall why;
            if (snug_plan_new(g, &req, &sp, &why, NULL) == SNUG_E_OOM) {
                req.budget = why.smallest_budget;
                assert_int_equal(snug_plan_new(g, &req, &sp, NULL, NULL), SNUG_OK);
            }
            char what[64];
            snprintf(what, sizeof what, "%s at budget %zu", zoo[z].name, req.budget);
            check_peak_agrees(sp, what);
            snug_plan_free(sp);
        }
        snug_graph_free(g);
    }
}

/* Whether every step that reads tensor t (views aside) is a convolution reading it packed in forward. */
static bool read_packed_by_convolutions(const snug_graph *g, const plan *p, snug_tensor t) {
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            if (graph_base_tensor(g, g->nodes[i].inputs[j]) != t || (g->nodes[i].op->flags & OP_IS_VIEW)) continue;
            if (g->nodes[i].op != &op_conv2d || !p->fwd_packed[i]) return false;
            any = true;
        }
    return any;
}

/* The bf16 plan of the built-in unet at batch 2 in micro-batches of m (*g its graph, *req its request). */
static snug_plan *unet_bf16_plan(size_t m, snug_graph **g, snug_plan_request *req) {
    assert_int_equal(snug_model_builtin("unet", g, NULL), SNUG_OK);
    snug_train_config cfg = snug_train_config_default();
    *req = request_for(2, m, NONE, 0, &cfg);
    req->precision = SNUG_PRECISION_BF16;
    snug_plan *sp;
    assert_int_equal(snug_plan_new(*g, req, &sp, NULL, NULL), SNUG_OK);
    return sp;
}

/* In a bf16 unet plan each GroupNorm reads its input packed in forward, and one whose readers are all
 * convolutions reading it packed writes only its packed copy: no float32 instance of it exists (the bits are
 * test_rounds_output's and test_precision's packing_changes_no_bit). */
static void normalisations_write_packed_for_convolutions(void **state) {
    (void)state;
    snug_graph *g;
    snug_plan_request req;
    snug_plan *sp = unet_bf16_plan(2, &g, &req);
    const plan *p = &sp->p;
    int norms = 0, packed_only = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op != &op_groupnorm && n->op != &op_groupnorm_relu) continue;
        norms++;
        assert_true(p->fwd_packed[i]);
        if (!read_packed_by_convolutions(g, p, n->output)) continue;
        assert_true(p->packed_only[n->output]);
        assert_true(p->value_fwd[n->output] < 0 && p->packed[n->output] >= 0);
        packed_only++;
    }
    printf("# unet bf16 m=2: %d of %d GroupNorms write only packed outputs\n", packed_only, norms);
    assert_true(packed_only > 0);
    /* the summary counts a regenerated input's float32 bytes, whether forward made it in float32 or packed only */
    size_t regenerated = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (p->regen[i])
            regenerated += g->tensors[graph_base_tensor(g, g->nodes[i].inputs[0])].numel * 2 * sizeof(float);
    snug_plan_summary sum;
    snug_plan_summarize(sp, &sum);
    assert_int_equal(sum.regenerated_bytes, regenerated);
    snug_plan_free(sp);
    snug_graph_free(g);
}

/* A bf16 unet at micro-batch 1: where a convolution reads its input only from the packed copy and its bf16
 * kernels read that as it lies (conv3x3_bf16 on this CPU, a sample at a time), the plan reserves no float32
 * stage for the input, and the trainer's reservation is the plan's (the convolution touches no stage it was
 * not given). Elsewhere (a regenerated input, another CPU) the stage is regen_stage_bytes, as before. */
static void packed_inputs_read_as_they_lie(void **state) {
    (void)state;
    snug_graph *g;
    snug_plan_request req;
    snug_plan *sp = unet_bf16_plan(1, &g, &req);
    snug_train_config cfg = snug_train_config_default();
    const plan *p = &sp->p;
    int stageless = 0, packed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op != &op_conv2d || !p->packed_in[i]) continue;
        packed++;
        const size_t stage = plan_op_input_stage(n, &p->variant, p->m, p->threads, p->regen[i]);
        if (p->regen[i] || !conv3x3_bf16_in_use()) assert_int_equal(stage, plan_op_stage(n, &p->variant, p->m, p->threads));
        stageless += stage == 0;
    }
    printf("# unet bf16 m=1: %d of %d convolutions reading packed inputs reserve no input stage\n", stageless, packed);
    if (conv3x3_bf16_in_use()) assert_true(stageless > 0);
    snug_trainer *tr;
    assert_int_equal(trainer_in(g, &req, &cfg, &tr, NULL), SNUG_OK);
    snug_plan_summary s;
    snug_plan_summarize(sp, &s);
    snug_mem_report rep;
    snug_trainer_memory(tr, &rep);
    assert_memory_equal(rep.in_use, s.bytes, sizeof rep.in_use);
    trainer_done(tr);
    snug_plan_free(sp);
    snug_graph_free(g);
}

static void gradients(snug_graph *g, const snug_dataset *ds, snug_checkpoint_policy pol, size_t budget,
                      size_t m, float **out, size_t *n_out, double *loss) {
    snug_train_config cfg = snug_train_config_default();
    cfg.seed = 9;
    const snug_plan_request req = request_in(12, m ? m : 12, pol, budget, &cfg);
    snug_trainer *tr;
    snug_error err;
    if (trainer_in(g, &req, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    size_t idx[12];
    for (size_t i = 0; i < 12; i++) idx[i] = (i * 5) % 20;
    /* Two optimizer steps first, so that the dropout key's step and the parameters have moved. */
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ds, idx, 12, &st, &err), SNUG_OK);
    assert_int_equal(snug_trainer_step(tr, ds, idx, 12, &st, &err), SNUG_OK);
    assert_int_equal(snug_trainer_gradients(tr, ds, idx, 12, loss, &err), SNUG_OK);
    size_t total = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t n;
        snug_trainer_param(tr, i, &n, NULL, NULL);
        total += n;
    }
    *out = malloc(total * sizeof **out);
    *n_out = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t n;
        float *val, *gr;
        snug_trainer_param(tr, i, &n, &val, &gr);
        /* BatchNorm's running statistics have no gradient; their values show a recompute left them alone. */
        memcpy(*out + *n_out, gr ? gr : val, n * sizeof *gr);
        *n_out += n;
    }
    trainer_done(tr);
}

static snug_dataset *random_data(size_t n) {
    float *x = malloc(n * 30 * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n * 30; i++) x[i] = snug_rng_uniform(3, 1, i) * 2 - 1;
    for (size_t i = 0; i < n; i++) y[i] = (int32_t)snug_rng_below(3, 2, i, 5);
    snug_dataset *ds;
    assert_int_equal(snug_dataset_from_memory(x, y, n, 1, 6, 5, 5, &ds, NULL), SNUG_OK);
    free(x);
    free(y);
    return ds;
}

static size_t recomputed_segments(const snug_graph *g, snug_checkpoint_policy pol, size_t m) {
    snug_train_config cfg = snug_train_config_default();
    const snug_plan_request req = request_in(m, m, pol, 0, &cfg);
    snug_plan *p;
    assert_int_equal(snug_plan_new(g, &req, &p, NULL, NULL), SNUG_OK);
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    printf("# %s m=%zu policy %d: %zu segments recomputed, %zu spared\n", snug_graph_name(g), m, (int)pol.kind,
           s.segments, s.spared_segments);
    snug_plan_free(p);
    return s.segments;
}

/* Recompute replays forward bit for bit, dropout masks and normalisation statistics included: every policy gives
 * the same gradient bits. */
static void recompute_is_bitwise_exact(void **state) {
    (void)state;
    snug_dataset *ds = random_data(20);
    for (int model_i = 2; model_i < N_MODELS; model_i++) {
        snug_graph *g = model(model_i);
        for (size_t m = 4; m <= 12; m += 8) {
            float *ref;
            size_t n;
            double loss_ref;
            gradients(g, ds, NONE, 0, m, &ref, &n, &loss_ref);
            plan none;
            plan_variant vn = plan_variant_of(NONE);
            plan_variant_compute(&vn, plan_compute_of(precision, products));
            snug_optim_config optim = snug_train_config_default().optim;
            assert_int_equal(plan_build(g, m, 2, &optim, &vn, &none, NULL), SNUG_OK);
            if (model_i == 3 && grads_packed) { /* the packed gradients' paths are taken */
                snug_train_config cfg = snug_train_config_default();
                const snug_plan_request req = request_in(12, m, NONE, 0, &cfg);
                snug_plan *sp = plan_in(g, &req);
                size_t packed = 0;
                for (int t = 0; t < g->n_tensors; t++) packed += sp->p.grad_packed[t];
                printf("# norms m=%zu: %zu gradients packed\n", m, packed);
                assert_true(packed > 0);
                snug_plan_free(sp);
            }
            if (model_i == 3) { /* cheap replays the concatenation, LayerNorm and GELU; not gn2: with relu2
                                 * folded in, no backward reads its output any more */
                plan cheap;
                plan_variant vc = plan_variant_of(CHEAP);
                assert_int_equal(plan_build(g, m, 2, &optim, &vc, &cheap, NULL), SNUG_OK);
                assert_int_equal(cheap.seg.n_segments, 3);
                for (int i = 0; i < g->n_nodes; i++) /* the concatenation replays from conv4's output */
                    if (strcmp(g->nodes[i].name, "cat") == 0) assert_true(cheap.seg.recompute[i]);
                plan_free(&cheap);
            }
            const snug_checkpoint_policy policies[] = {SQRT, {SNUG_CHECKPOINT_EVERY, 1}, {SNUG_CHECKPOINT_EVERY, 3},
                                                       CHEAP, AUTO};
            for (int k = 0; k < 5; k++) {
                /* every:3 recomputes something, and sqrt on the residual model (every:1 cannot: every output
                 * crosses a cut; on the norms model, whose BatchNorm + ReLU pairs fold into single layers,
                 * sqrt's segments would not lower the plan's total and are spared; in bf16 its GroupNorm reads
                 * its input from the packed copy, so every:3 lowers nothing there either, and cheap's replay of
                 * the concatenation is what recomputes) */
                const bool bf16_norms = model_i == 3 && precision == SNUG_PRECISION_BF16;
                if ((k == 2 && !bf16_norms) || (k == 0 && model_i == 2) || (k == 3 && bf16_norms))
                    assert_true(recomputed_segments(g, policies[k], m) > 0);
                float *gr;
                size_t n2;
                double loss;
                /* AUTO under a budget a little below the plain plan, so that it must recompute something (in
                 * bf16 the norms model's plain plan is already its leanest at this micro-batch: at it) */
                size_t budget = k == 4 ? none.total - (bf16_norms ? 0 : 1) : 0;
                gradients(g, ds, policies[k], budget, m, &gr, &n2, &loss);
                assert_int_equal(n, n2);
                assert_memory_equal(gr, ref, n * sizeof *gr);
                assert_true(loss == loss_ref);
                free(gr);
            }
            plan_free(&none);
            free(ref);
        }
        snug_graph_free(g);
    }
    snug_dataset_free(ds);
}

/* A tensor read by three consumers, one of them add(h, h), between smooth layers: the executor lets the first
 * writer of each activation gradient write it whole (op_call.din_fresh) and every later one add into it. */
static snug_graph *fan_out_model(void) {
    snug_graph *g = snug_graph_new("fan-out");
    snug_tensor h = snug_gelu(g, "g1", snug_linear(g, "fc_in", snug_flatten(g, "flat", snug_input(g, "input", 1, 6, 5)), 12));
    snug_tensor v = snug_layernorm(g, "ln", snug_linear(g, "fc_b", h, 12), 1e-5f);
    snug_tensor u = snug_add(g, "twice", h, h); /* after fc_b: the first writer of h's gradient in backward */
    snug_tensor w = snug_gelu(g, "g2", snug_add(g, "sum", u, v));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", w, 5));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* Whole-model gradients against central differences of the loss, every parameter of the fan-out model, at a
 * micro-batch that splits the batch (accumulation) and at the whole batch. */
static void fresh_writers_match_finite_differences(void **state) {
    (void)state;
    snug_dataset *ds = random_data(20);
    size_t idx[12];
    for (size_t i = 0; i < 12; i++) idx[i] = (i * 7) % 20;
    for (size_t m = 5; m <= 12; m += 7) {
        snug_graph *g = fan_out_model();
        snug_train_config cfg = snug_train_config_default();
        cfg.seed = 4;
        snug_trainer *tr;
        snug_error err;
        if (trainer_simple(g, 12, m ? m : 12, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
        double loss, worst = 0.0;
        assert_int_equal(snug_trainer_gradients(tr, ds, idx, 12, &loss, &err), SNUG_OK);
        /* the analytic gradients first: every loss evaluation below writes the gradient buffers again */
        const size_t n_params = snug_trainer_param_count(tr);
        float *want[16];
        assert_true(n_params <= 16);
        for (size_t i = 0; i < n_params; i++) {
            size_t n;
            float *val, *gr;
            snug_trainer_param(tr, i, &n, &val, &gr);
            want[i] = malloc(n * sizeof *want[i]);
            memcpy(want[i], gr, n * sizeof *want[i]);
        }
        for (size_t i = 0; i < n_params; i++) {
            size_t n;
            float *val;
            const char *name = snug_trainer_param(tr, i, &n, &val, NULL);
            for (size_t j = 0; j < n; j += 3) { /* every third element: all layers, a quick test */
                const float keep = val[j], h = 3e-3f;
                double lp, lm;
                val[j] = keep + h;
                assert_int_equal(snug_trainer_gradients(tr, ds, idx, 12, &lp, &err), SNUG_OK);
                val[j] = keep - h;
                assert_int_equal(snug_trainer_gradients(tr, ds, idx, 12, &lm, &err), SNUG_OK);
                val[j] = keep;
                /* float losses: 8e-4 of the scale at worst (h = 3e-3); a lost or doubled path is off by O(1) */
                const double fd = (lp - lm) / (2.0 * h), diff = fabs(fd - want[i][j]), scale = fabs(fd) + 1e-2;
                if (diff > 5e-3 * scale)
                    fail_msg("m=%zu %s[%zu]: gradient %.6g, finite difference %.6g", m, name, j, (double)want[i][j], fd);
                if (diff / scale > worst) worst = diff / scale;
            }
            free(want[i]);
        }
        printf("# fan-out model m=%zu: worst relative difference %.2e\n", m, worst);
        trainer_done(tr);
        snug_graph_free(g);
    }
    snug_dataset_free(ds);
}

/* The cheap policy replays normalisations and element-wise layers from the tensors backward keeps anyway, for
 * well under 1% of the FLOPs, and only cheap layers. On the built-in models it now saves little or nothing:
 * what it would replay there (ResNet-20's and the U-Net's normalised outputs, the GPT's LayerNorm and GELU
 * outputs) is read by one convolution or product each, which regenerates it without any policy
 * (plan/regen.c); the U-Net's concatenations, replayed from their upsampled halves, are what is left (6%). On
 * an MLP (ReLU already in place over a product nobody else keeps) it changes nothing. */
static void cheap_replays_only_cheap_layers(void **state) {
    (void)state;
    static const char *const names[] = {"resnet20", "gpt", "unet", "mlp"};
    static const double most[] = {1.0, 1.0, 0.97, 1.0}; /* cheap arena / plain arena at most */
    snug_optim_config optim = snug_train_config_default().optim;
    for (int i = 0; i < 4; i++) {
        snug_graph *g = model_named(names[i], NULL);
        assert_non_null(g);
        plan none, cheap;
        plan_variant vn = plan_variant_of(NONE), vc = plan_variant_of(CHEAP);
        const size_t m = 2;
        assert_int_equal(plan_build(g, m, 2, &optim, &vn, &none, NULL), SNUG_OK);
        assert_int_equal(plan_build(g, m, 2, &optim, &vc, &cheap, NULL), SNUG_OK);
        double ratio = (double)cheap.arena_bytes / (double)none.arena_bytes;
        printf("# %s m=%zu: activations none %zu, cheap %zu (%.2f), recompute %.3f%% of the step's FLOPs\n", names[i],
               m, none.arena_bytes, cheap.arena_bytes, ratio,
               100 * cheap.recompute_flops / (cheap.fwd_flops + cheap.bwd_flops));
        assert_true(ratio <= most[i]);
        assert_true(cheap.recompute_flops < 0.01 * (cheap.fwd_flops + cheap.bwd_flops));
        for (int n = 0; n < g->n_nodes; n++)
            if (cheap.seg.recompute[n]) {
                const graph_node *nd = &g->nodes[n];
                assert_true(nd->op->flops(nd) < 16.0 * (double)g->tensors[nd->output].numel);
            }
        if (i == 3) assert_int_equal(cheap.seg.n_segments, 0);
        check_no_overlap(&cheap, names[i]);
        plan_free(&none);
        plan_free(&cheap);
        snug_graph_free(g);
    }
}

/* Checkpointing a deep chain: sqrt cuts the activation arena several fold at the cost of about one forward. */
static void sqrt_cuts_deep_chain(void **state) {
    (void)state;
    snug_graph *g = residual_model(32);
    snug_optim_config optim = snug_train_config_default().optim;
    plan none, sq;
    plan_variant vn = plan_variant_of(NONE), vs = plan_variant_of(SQRT);
    assert_int_equal(plan_build(g, 64, 2, &optim, &vn, &none, NULL), SNUG_OK);
    assert_int_equal(plan_build(g, 64, 2, &optim, &vs, &sq, NULL), SNUG_OK);
    printf("# residual-32 m=64: activations none %zu, sqrt %zu (%.1fx), recompute %.0f%% of forward\n",
           none.arena_bytes, sq.arena_bytes, (double)none.arena_bytes / (double)sq.arena_bytes,
           100 * sq.recompute_flops / sq.fwd_flops);
    assert_true(none.arena_bytes >= 4 * sq.arena_bytes);
    assert_true(sq.recompute_flops <= sq.fwd_flops);
    check_no_overlap(&sq, "sqrt");
    plan_free(&none);
    plan_free(&sq);
    snug_graph_free(g);
}

/* sqrt and every:N keep whole every segment whose recompute would not lower the plan's total: the same memory
 * to the byte, less recompute. The MNIST CNN's peak is in relu2's backward, which no checkpoint shrinks: sqrt
 * there recomputes nothing. */
static void sparing_drops_only_useless_recompute(void **state) {
    (void)state;
    static const char *const names[] = {"cnn", "resnet20", "mlp", "gpt"};
    static const size_t ms[] = {64, 16, 64, 2};
    snug_optim_config optim = snug_train_config_default().optim;
    for (int i = 0; i < 4; i++) {
        snug_graph *g = model_named(names[i], NULL);
        assert_non_null(g);
        const snug_checkpoint_policy policies[] = {SQRT, {SNUG_CHECKPOINT_EVERY, 3}};
        for (int k = 0; k < 2; k++) {
            plan all, spared;
            plan_variant v = plan_variant_of(policies[k]);
            assert_int_equal(plan_build(g, ms[i], 2, &optim, &v, &all, NULL), SNUG_OK);
            assert_int_equal(plan_build_policy(g, ms[i], 2, &optim, policies[k], FP32_AUTO, 0, &spared, NULL), SNUG_OK);
            printf("# %s m=%zu %s: total %zu -> %zu, recompute %.1f%% -> %.1f%% of forward, %d segments spared\n",
                   names[i], ms[i], k ? "every:3" : "sqrt", all.total, spared.total,
                   100 * all.recompute_flops / all.fwd_flops, 100 * spared.recompute_flops / spared.fwd_flops,
                   __builtin_popcountll(spared.variant.spared));
            assert_true(spared.total <= all.total);
            assert_true(spared.recompute_flops <= all.recompute_flops);
            assert_true(all.recompute_flops > 0);
            if (i == 0 && k == 0) assert_true(spared.recompute_flops == 0); /* the cnn under sqrt */
            check_no_overlap(&spared, names[i]);
            plan_free(&all);
            plan_free(&spared);
        }
        snug_graph_free(g);
    }
}

/* Sparing as it would go with the first plan's packing choice kept for every candidate: the segments, last
 * first, each kept whole where the total does not grow. */
static size_t spared_total_inheriting_packing(const snug_graph *g, size_t m, const snug_optim_config *optim,
                                              const plan_variant *asked) {
    plan p;
    assert_int_equal(plan_build(g, m, 2, optim, asked, &p, NULL), SNUG_OK);
    const size_t first = p.total;
    int last = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (p.seg.recompute[i] && p.seg.segment[i] > last) last = p.seg.segment[i];
    for (int s = last; s >= 0 && s < 64; s--) {
        plan_variant v = p.variant;
        v.spared |= (uint64_t)1 << s;
        plan q;
        assert_int_equal(plan_build(g, m, 2, optim, &v, &q, NULL), SNUG_OK);
        if (q.total <= first) {
            plan_free(&p);
            p = q;
        } else {
            plan_free(&q);
        }
    }
    const size_t total = p.total;
    plan_free(&p);
    return total;
}

/* bf16: sparing decides for each candidate whether to pack, so the plan it keeps is no larger than the same
 * segments spared with the other choice, nor than sparing with the first plan's choice kept for every
 * candidate (a packed plan can lose to the plain one before sparing, by a stage's bytes at a peak in a replay,
 * and win once the replay is spared: resnet20-gn and gpt at these micro-batches). */
static void sparing_chooses_packing_per_candidate(void **state) {
    (void)state;
    static const char *const names[] = {"resnet20", "resnet20-gn", "gpt"};
    static const size_t ms[] = {16, 4, 2};
    const plan_compute bf16 = plan_compute_of(SNUG_PRECISION_BF16, SNUG_PRODUCTS_AUTO);
    snug_optim_config optim = snug_train_config_default().optim;
    for (int i = 0; i < 3; i++) {
        snug_graph *g = model_named(names[i], NULL);
        assert_non_null(g);
        plan spared, other;
        assert_int_equal(plan_build_policy(g, ms[i], 2, &optim, SQRT, bf16, 0, &spared, NULL), SNUG_OK);
        plan_variant v = plan_variant_of(SQRT);
        plan_variant_compute(&v, bf16);
        const size_t inheriting = spared_total_inheriting_packing(g, ms[i], &optim, &v);
        v.spared = spared.variant.spared;
        v.no_packing = !spared.variant.no_packing; /* packing: plan_build still takes the leaner of the two */
        assert_int_equal(plan_build(g, ms[i], 2, &optim, &v, &other, NULL), SNUG_OK);
        printf("# %s m=%zu bf16 sqrt: total %zu (%s), the same segments %s: %zu, the first choice kept: %zu\n",
               names[i], ms[i], spared.total, spared.variant.no_packing ? "plain" : "packed",
               v.no_packing ? "plain" : "packed or plain", other.total, inheriting);
        assert_true(spared.total <= other.total);
        assert_true(spared.total <= inheriting);
        plan_free(&spared);
        plan_free(&other);
        snug_graph_free(g);
    }
}

/* AUTO, over random budgets and models: a plan it reports as fitting fits, it recomputes no more than sqrt
 * whenever sqrt fits, and the trainer it builds stays inside the budget. */
static void auto_respects_budgets(void **state) {
    (void)state;
    snug_optim_config optim = snug_train_config_default().optim;
    for (int i = 0; i < N_MODELS; i++) {
        snug_graph *g = model(i);
        size_t m = 4;
        plan none, lean, sq;
        plan_variant vn = plan_variant_of(NONE), vs = plan_variant_of(SQRT);
        assert_int_equal(plan_build(g, m, 2, &optim, &vn, &none, NULL), SNUG_OK);
        assert_int_equal(plan_build(g, m, 2, &optim, &vs, &sq, NULL), SNUG_OK);
        assert_int_equal(plan_build_auto(g, m, 2, &optim, FP32_AUTO, 1, &lean, NULL), SNUG_OK);
        for (int r = 0; r < 12; r++) {
            size_t budget = lean.total + (size_t)(snug_rng_uniform(11, (uint64_t)i, (uint64_t)r) *
                                                 (double)(none.total - lean.total + 1));
            plan a;
            assert_int_equal(plan_build_auto(g, m, 2, &optim, FP32_AUTO, budget, &a, NULL), SNUG_OK);
            assert_true(a.total <= budget);
            check_no_overlap(&a, "auto");
            if (sq.total <= budget) assert_true(a.recompute_flops <= sq.recompute_flops);
            plan_free(&a);
        }
        plan_free(&none);
        plan_free(&lean);
        plan_free(&sq);
        snug_graph_free(g);
    }
}

/* The automatic micro-batch: the trainer it configures fits, and k = ceil(B/m) keeps the batch exact; a budget
 * nothing fits is explained. */
static void choose_fits_or_explains(void **state) {
    (void)state;
    snug_graph *g = model_named("cnn", NULL);
    snug_train_config cfg = snug_train_config_default();
    static const size_t budgets[] = {6u << 20, 8u << 20, 24u << 20, 200u << 20};
    const snug_checkpoint_policy autop = {SNUG_CHECKPOINT_AUTO, 0};
    for (int i = 0; i < 4; i++) {
        const snug_plan_request req = request_for(256, SNUG_MICRO_BATCH_AUTO, autop, budgets[i], &cfg);
        snug_trainer *tr;
        snug_error err;
        if (trainer_for(g, &req, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
        snug_mem_report rep;
        snug_trainer_memory(tr, &rep);
        snug_plan_summary s;
        snug_plan_summarize(snug_trainer_plan(tr), &s);
        assert_true(rep.peak <= budgets[i]);
        assert_true(s.micro_batch_chosen);
        assert_int_equal(s.micro_batches, (256 + s.micro_batch - 1) / s.micro_batch);
        assert_int_equal(s.last_micro_batch, 256 - (s.micro_batches - 1) * s.micro_batch);
        printf("# cnn B=256 in %zu MiB: micro-batch %zu, checkpoint %s, %.2f MiB\n", budgets[i] >> 20, s.micro_batch,
               s.segments ? "auto" : "none", (double)rep.peak / (1 << 20));
        trainer_done(tr);
    }
    snug_plan *p = NULL;
    snug_plan_shortfall why;
    snug_error err;
    snug_plan_request req = request_for(256, SNUG_MICRO_BATCH_AUTO, autop, 5u << 20, &cfg);
    assert_int_equal(snug_plan_new(g, &req, &p, &why, &err), SNUG_E_OOM);
    assert_null(p);
    assert_non_null(strstr(err.message, "even at micro-batch 1"));
    assert_non_null(strstr(err.message, "the smallest budget that fits is"));
    assert_non_null(strstr(err.message, "params 1.6"));
    assert_true(why.fixed <= 5u << 20 && why.smallest_budget > 5u << 20);
    req.budget = 1u << 20; /* below the parameters alone */
    assert_int_equal(snug_plan_new(g, &req, &p, &why, &err), SNUG_E_OOM);
    assert_true(why.fixed > 1u << 20);
    assert_non_null(strstr(err.message, "whatever the micro-batch"));
    snug_graph_free(g);
}

static snug_tensor output_of(const snug_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return g->nodes[i].output;
    fail_msg("no layer %s", name);
    return -1;
}

/* The thread whose part of a buffer of `bytes` holds byte `at`: T contiguous parts of the m samples, or of the
 * bytes where m < T (the ops then split within samples). */
static int owner(size_t m, int T, size_t at, size_t bytes) {
    const double f = (double)at / (double)bytes;
    return m >= (size_t)T ? (int)(f * (double)m) * T / (int)m : (int)(f * T);
}

/* Bytes where two buffers that reuse the same memory give it to different threads, over every such pair, with
 * T contiguous parts of m samples per buffer (as the ops split a batch). */
static double crossed(const plan *p, int T) {
    double total = 0;
    for (int i = 0; i < p->n_bufs; i++)
        for (int j = i + 1; j < p->n_bufs; j++) {
            const act_buffer *x = &p->bufs[i], *y = &p->bufs[j];
            if (x->shares >= 0 || y->shares >= 0) continue;
            const size_t lo = x->offset > y->offset ? x->offset : y->offset;
            const size_t hi = x->offset + x->bytes < y->offset + y->bytes ? x->offset + x->bytes : y->offset + y->bytes;
            for (size_t at = lo; at < hi; at += 64) /* a line at a time: plenty for a sum */
                total += owner(p->m, T, at - x->offset, x->bytes) != owner(p->m, T, at - y->offset, y->bytes) ? 64 : 0;
        }
    return total;
}

/* With several threads the arena is the same size, and the buffers that reuse memory hand far less of it from
 * one thread's part to another's; the cnn's second convolution's output (half the first's) sits centred on the
 * first's, so that each thread writes what it wrote before. */
static void thread_parts_stay_on_their_threads(void **state) {
    (void)state;
    snug_optim_config optim = snug_train_config_default().optim;
    for (int i = 0; i < N_MODELS; i++) {
        snug_graph *g = model(i);
        static const size_t ms[] = {1, 8, 64};
        for (size_t k = 0; k < 3; k++) {
            plan one, two;
            plan_variant v = plan_variant_of(NONE);
            assert_int_equal(plan_build(g, ms[k], 1, &optim, &v, &one, NULL), SNUG_OK);
            assert_int_equal(plan_build(g, ms[k], 2, &optim, &v, &two, NULL), SNUG_OK);
            assert_int_equal(two.arena_bytes, one.arena_bytes);
            const double c1 = crossed(&one, 2), c2 = crossed(&two, 2);
            printf("# %s m=%zu: %.2f MiB handed between 2 threads' parts by lowest-fit offsets, %.2f MiB by the "
                   "planner's\n", snug_graph_name(g), ms[k], c1 / (1 << 20), c2 / (1 << 20));
            assert_true(c2 <= c1);
            if (i == 1 && ms[k] == 64) {
                assert_true(c2 < 0.5 * c1);
                const act_buffer *c1out = &two.bufs[two.value_fwd[output_of(g, "conv1")]];
                const act_buffer *c2out = &two.bufs[two.value_fwd[output_of(g, "conv2")]];
                assert_int_equal(c1out->offset + c1out->bytes / 2, c2out->offset + c2out->bytes / 2);
            }
            plan_free(&one);
            plan_free(&two);
        }
        snug_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offsets_never_overlap),   cmocka_unit_test(thread_parts_stay_on_their_threads),
        cmocka_unit_test(reserved_equals_planned), cmocka_unit_test(peak_is_one_figure),
        cmocka_unit_test(recompute_is_bitwise_exact), cmocka_unit_test(cheap_replays_only_cheap_layers),
        cmocka_unit_test(sqrt_cuts_deep_chain),
        cmocka_unit_test(sparing_drops_only_useless_recompute),
        cmocka_unit_test(sparing_chooses_packing_per_candidate),
        cmocka_unit_test(auto_respects_budgets),   cmocka_unit_test(choose_fits_or_explains),
        cmocka_unit_test(fresh_writers_match_finite_differences),
        cmocka_unit_test(normalisations_write_packed_for_convolutions),
        cmocka_unit_test(packed_inputs_read_as_they_lie),
        cmocka_unit_test_setup_teardown(offsets_never_overlap, in_bf16, in_fp32),
        cmocka_unit_test_setup_teardown(reserved_equals_planned, in_bf16, in_fp32),
        cmocka_unit_test_setup_teardown(peak_is_one_figure, in_bf16, in_fp32),
        cmocka_unit_test_setup_teardown(recompute_is_bitwise_exact, in_bf16, in_fp32),
        cmocka_unit_test_setup_teardown(reserved_equals_planned, in_bf16_own, in_fp32),
        cmocka_unit_test_setup_teardown(recompute_is_bitwise_exact, in_bf16_own, in_fp32),
        cmocka_unit_test_setup_teardown(offsets_never_overlap, in_bf16_grads, in_fp32),
        cmocka_unit_test_setup_teardown(reserved_equals_planned, in_bf16_grads, in_fp32),
        cmocka_unit_test_setup_teardown(recompute_is_bitwise_exact, in_bf16_grads, in_fp32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
