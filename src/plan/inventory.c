/* What a plan holds, buffer by buffer and step by step, and its peak: the one place that adds a step's bytes up,
 * so that the plan's report, its buffer list and its timeline give the same figure for the same step. */
#include <string.h>

#include "ops/op.h"
#include "plan/plan.h"

/* The blocks outside the activation arena, live over the whole step: their category, name and bytes. */
typedef struct fixed_block {
    snug_mem_category category;
    const char *what;
    size_t bytes;
} fixed_block;

enum { FIXED_BLOCKS = 11 };

static void fixed_blocks(const plan *p, fixed_block b[FIXED_BLOCKS]) {
    const fixed_block all[FIXED_BLOCKS] = {
        {SNUG_MEM_PARAMS, "parameters", p->params_bytes},
        {SNUG_MEM_PARAMS, "buffers and their copy", p->state_bytes},
        {SNUG_MEM_PARAMS, "kept weights (transformed, bf16 copies)", p->kept_bytes},
        {SNUG_MEM_GRADS, "parameter gradients", p->params_bytes},
        {SNUG_MEM_GRADS, "deferred weight gradients", p->pending_bytes},
        {SNUG_MEM_OPTIM, "optimizer state", p->optim_bytes},
        {SNUG_MEM_DATA, "input", p->input_bytes},
        {SNUG_MEM_DATA, "targets", p->targets_bytes},
        {SNUG_MEM_DATA, "data sets", p->data_set_bytes},
        {SNUG_MEM_DATA, "read-ahead ring", p->ring_bytes},
        {SNUG_MEM_WORKSPACE, "runtime", p->runtime_bytes},
    };
    memcpy(b, all, sizeof all);
}

/* The workspace step s's layer holds while it runs (0 for the update). */
static size_t step_workspace(const snug_plan *sp, int s) {
    const int node = sp->p.steps[s].node;
    return node >= 0 ? plan_node_workspace(sp->g, &sp->p, node) : 0;
}

static void step_bytes(const snug_plan *sp, int s, size_t bytes[SNUG_MEM_NCATEGORIES]) {
    fixed_block b[FIXED_BLOCKS];
    fixed_blocks(&sp->p, b);
    memset(bytes, 0, SNUG_MEM_NCATEGORIES * sizeof *bytes);
    for (int i = 0; i < FIXED_BLOCKS; i++) bytes[b[i].category] += b[i].bytes;
    bytes[SNUG_MEM_ACTIVATIONS] = sp->p.live_at[s];
    bytes[SNUG_MEM_WORKSPACE] += step_workspace(sp, s);
}

void plan_peak(const snug_plan *sp, size_t *peak, size_t *at) {
    *peak = 0, *at = 0;
    for (int s = 0; s < sp->p.n_steps; s++) {
        size_t bytes[SNUG_MEM_NCATEGORIES], total = 0;
        step_bytes(sp, s, bytes);
        for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++) total += bytes[c];
        if (total > *peak) *peak = total, *at = (size_t)s;
    }
}

size_t snug_plan_step_count(const snug_plan *p) { return (size_t)p->p.n_steps; }

void snug_plan_step(const snug_plan *sp, size_t i, snug_plan_step_info *s) {
    const plan *p = &sp->p;
    const sched_step *st = &p->steps[i];
    const snug_graph *g = sp->g;
    memset(s, 0, sizeof *s);
    s->layer = st->node >= 0 ? g->nodes[st->node].name : "optimizer";
    s->phase = st->phase;
    step_bytes(sp, (int)i, s->bytes);
    if (st->node < 0) {
        s->flops = 4.0 * (double)g->param_numel;
        return;
    }
    const graph_node *n = &g->nodes[st->node];
    double f = (n->op->flops ? n->op->flops(n) : 0) * (double)p->m;
    s->flops = st->phase == SNUG_PHASE_BACKWARD ? plan_backward_flops(g, n) * (double)p->m : f;
}

/* The rows after the activation arena's: the blocks that are not empty, then each step's workspace. */
static size_t fixed_rows(const plan *p) {
    fixed_block b[FIXED_BLOCKS];
    fixed_blocks(p, b);
    size_t n = 0;
    for (int i = 0; i < FIXED_BLOCKS; i++) n += b[i].bytes > 0;
    return n;
}

size_t snug_plan_buffer_count(const snug_plan *sp) {
    size_t n = (size_t)sp->p.n_bufs + fixed_rows(&sp->p);
    for (int s = 0; s < sp->p.n_steps; s++) n += step_workspace(sp, s) > 0;
    return n;
}

static void arena_buffer(const snug_plan *sp, size_t i, snug_plan_buffer_info *b) {
    static const char *const what[2][5] = {
        {"output", "gradient", "saved", "packed output", "packed gradient"},
        {"recomputed output", "gradient", "recomputed saved", "packed output", "packed gradient"}};
    static const char *const dtype[5] = {"fp32", "fp32", "own", "bf16", "bf16"};
    const act_buffer *x = &sp->p.bufs[i];
    const bool unpacked = x->kind == ACT_VALUE && sp->p.value_bwd[sp->g->nodes[x->node].output] == (int)i;
    *b = (snug_plan_buffer_info){
        .layer = sp->g->nodes[x->node].name,
        .what = unpacked ? "unpacked output" : what[x->recomputed][x->kind],
        .dtype = dtype[x->kind],
        .category = SNUG_MEM_ACTIVATIONS,
        .bytes = x->bytes,
        .offset = x->offset,
        .first_step = (size_t)x->first,
        .last_step = (size_t)x->last,
        .in_place = x->shares >= 0,
    };
}

/* Row i past the arena's: a block of the whole step (layer "(model)"), or the workspace of one step's layer
 * (at the start of the workspace block, after nothing: the runtime's threads keep their own). */
static void other_buffer(const snug_plan *sp, size_t i, snug_plan_buffer_info *b) {
    const size_t last = (size_t)sp->p.n_steps - 1;
    fixed_block f[FIXED_BLOCKS];
    fixed_blocks(&sp->p, f);
    for (int k = 0; k < FIXED_BLOCKS; k++) {
        if (f[k].bytes == 0) continue;
        if (i-- == 0) {
            *b = (snug_plan_buffer_info){.layer = "(model)", .what = f[k].what, .dtype = "own",
                                         .category = f[k].category, .bytes = f[k].bytes, .last_step = last};
            return;
        }
    }
    for (int s = 0; s < sp->p.n_steps; s++) {
        const size_t w = step_workspace(sp, s);
        if (w == 0 || i-- != 0) continue;
        *b = (snug_plan_buffer_info){.layer = sp->g->nodes[sp->p.steps[s].node].name, .what = "workspace",
                                     .dtype = "own", .category = SNUG_MEM_WORKSPACE, .bytes = w,
                                     .first_step = (size_t)s, .last_step = (size_t)s};
        return;
    }
}

void snug_plan_buffer(const snug_plan *sp, size_t i, snug_plan_buffer_info *b) {
    if (i < (size_t)sp->p.n_bufs) arena_buffer(sp, i, b);
    else other_buffer(sp, i - (size_t)sp->p.n_bufs, b);
}
