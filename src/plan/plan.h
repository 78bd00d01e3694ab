/* The plan: the schedule of one micro-batch (forward, backward with recompute, update), every activation buffer
 * with its lifetime in schedule steps and its offset in one arena, and the fixed blocks (parameters, gradients,
 * optimizer state, data, workspace). Computed from the graph alone: planning allocates no engine memory. The
 * executor reserves exactly these blocks, so the plan's total is the run's memory to the byte. */
#ifndef SNUG_PLAN_PLAN_H
#define SNUG_PLAN_PLAN_H

#include <stdint.h>

#include "graph/graph.h"
#include "ops/op.h"
#include "snug.h"

typedef struct sched_step {
    int node;
    snug_phase phase;
} sched_step;

typedef enum act_kind {
    ACT_VALUE,     /* a node's output */
    ACT_GRAD,      /* the gradient of a node's output */
    ACT_SAVED,     /* what an op keeps beyond its input and output (argmax, probabilities) */
    ACT_PACKED,    /* bf16: a node's output kept for backward in bfloat16, from its forward step to the first
                      step after forward that reads it (plan/packing.c) */
    ACT_GRAD_PACKED, /* bf16: the gradient of a node's output stored in bfloat16, in place of its ACT_GRAD,
                        where its reader and every writer take it so (plan/packed_grads.c) */
} act_kind;

typedef struct act_buffer {
    int node;
    act_kind kind;
    bool recomputed;   /* the instance made by a recompute step (values and saved) */
    size_t bytes;      /* rounded to SNUG_MEM_ALIGN */
    int first, last;   /* lifetime in schedule steps, inclusive */
    int shares;        /* -1, or the buffer whose memory this one continues in place (ReLU over its input) */
    size_t offset;     /* in the activation arena */
} act_buffer;

/* A concrete checkpoint choice: the policy's segments, whether only cheap element-wise outputs are dropped
 * (`selective`), how many of the first segments are recomputed (-1: all but the last), and which of the first
 * 64 segments are spared (kept whole: dropping them saved no memory). AUTO searches these.
 * no_window_extras leaves out what ops keep across a window to save time (op_desc.pending_bytes, kept_bytes:
 * pending rows, kept weights), where a budget has no room for it. no_regen keeps every input a backward reads
 * instead of regenerating some (plan/regen.c): the same bits with more memory, for comparisons. */
typedef struct plan_variant {
    snug_checkpoint_policy policy;  /* NONE, SQRT or EVERY */
    bool selective;
    int recomputed_segments;
    uint64_t spared;                /* bit s: segment s is not dropped */
    bool no_window_extras;
    bool no_regen;
    bool bf16;                      /* SNUG_PRECISION_BF16: every output rounded to bfloat16 */
    bool no_packing;                /* bf16 without packed copies: the same bits; plan_build takes it where
                                       packing does not lower the total (the peak is float32 gradients) */
    op_product product;             /* the linear layers' product (plan_compute_of) */
    bool no_grad_packing;           /* bf16 with float32 activation gradients: plan_build takes it where packing
                                       gradients does not lower the total (the same bits as before it) */
    bool grad_packing_anyway;       /* bf16: packed gradients wherever the ops take them, even where they lower
                                       nothing (comparisons, and tests of the paths they take) */
} plan_variant;

/* How a plan computes, whatever its checkpointing: its number format and its linear layers' product. */
typedef struct plan_compute {
    bool bf16;
    op_product product;
} plan_compute;

/* What a request's precision and products come to on this CPU (plan/products.c). */
plan_compute plan_compute_of(snug_precision precision, snug_products products);
/* Sets v's number format and product. */
void plan_variant_compute(plan_variant *v, plan_compute how);
/* The name snug_plan_summary.products gives a product. */
const char *plan_product_name(op_product product);

/* How a checkpoint policy applies to the nodes: segments, and which outputs are recomputed in backward. */
typedef struct plan_segments {
    int *segment;        /* per node; views and the input take their neighbour's */
    bool *recompute;     /* per node: its output (and saved bytes) are dropped after forward and replayed */
    int n_segments;      /* segments with at least one recomputed node */
} plan_segments;

typedef struct plan {
    size_t m;
    int threads;
    int optim_slots;                  /* floats of optimizer state per parameter (optim_state_slots) */
    plan_variant variant;             /* resolved: never AUTO */
    plan_segments seg;
    sched_step *steps;
    int n_steps, n_forward;           /* steps [0, n_forward) are forward; the last step is the update */
    act_buffer *bufs;
    int n_bufs, cap_bufs;
    int *value_fwd, *value_rec;       /* per tensor: buffer of its forward / recomputed value, -1 if none */
    int *packed, *value_bwd;          /* bf16, per tensor read after forward and not recomputed: its bfloat16
                                         copy (ACT_PACKED), written as its producer's forward ends, and the
                                         float32 instance unpacked from it that every step after forward
                                         reads; -1 if none */
    bool *packed_in;                  /* bf16, per node: its backward reads its input from the packed copy
                                         (OP_READS_PACKED: sample by sample, span by span or inside its
                                         products) instead of an unpacked instance */
    bool *packed_out;                 /* bf16, per node: its backward reads its kept output from the packed copy
                                         (OP_READS_OUTPUT_PACKED) instead of an unpacked instance */
    bool *fwd_packed;                 /* bf16, per node: its forward reads the inputs that have a packed copy from
                                         it (a concatenation; a convolution after one), no float32 instance */
    bool *packed_only;                /* bf16, per tensor: the value exists only as its packed copy (a
                                         concatenation's output whose readers all read it packed) */
    bool round_input;                 /* bf16: the input batch is rounded to bfloat16 before the first layer
                                         (not where a layer reads it as token indices) */
    int *grad;                        /* per tensor: buffer of its gradient, -1 if none */
    bool *grad_packed;                /* bf16, per tensor: its gradient is stored in bfloat16 (ACT_GRAD_PACKED):
                                         its producer's backward reads it and every reader's backward writes it
                                         packed (op_call.grads) */
    int *saved_fwd, *saved_rec;       /* per node */
    size_t arena_bytes;
    bool unplaced;                    /* planned under a ceiling (plan_build_under) with its offsets not (or not
                                         all) assigned; its total is exact where it is at most that ceiling, else
                                         a lower bound over it. Compared by a search, never run: plan_place */
    size_t workspace_bytes, input_bytes, targets_bytes, params_bytes, optim_bytes;
    size_t state_bytes;               /* non-trainable buffers (running statistics) and their copy from the
                                         window's start, counted as params */
    size_t pending_bytes;             /* ops' deferred weight-gradient rows (op_desc.pending_bytes), counted as
                                         gradients */
    size_t *pending_at;               /* per node: its offset in the pending block, or SIZE_MAX for none */
    size_t kept_bytes;                /* ops' weights kept across a window (op_desc.kept_bytes), counted as
                                         params */
    size_t *kept_at;                  /* per node: its offset in the kept block, or SIZE_MAX for none */
    bool *regen;                      /* per node: its backward regenerates its input instead of keeping it
                                         (plan/regen.c): the input dies after forward */
    size_t targets_per_sample;
    size_t data_set_bytes;            /* what the data sets hold (snug_plan_request.data_bytes), counted as data */
    size_t runtime_bytes;             /* snug_plan_request.runtime_bytes, counted as workspace */
    size_t ring_slots;                /* micro-batches read ahead (snug_plan_request.prefetch) */
    size_t ring_bytes;                /* their buffers: ring_slots x (input + targets) of a micro-batch, data */
    int ring_threads;                 /* the threads that fill them (snug_plan_request.data_threads) */
    size_t bytes[SNUG_MEM_NCATEGORIES];
    size_t total;
    size_t live_peak;
    int live_peak_step;
    size_t *live_at;                  /* per step: the activation bytes live at it */
    double fwd_flops, bwd_flops, recompute_flops;  /* per micro-batch of m samples */
} plan;

typedef struct plan_memo plan_memo; /* plan/memo.c, below */

/* A public plan (snug_plan_new): the plan, its graph, and the request it answers, with the micro-batch and the
 * policy resolved where the request left them free (request.micro_batch is the chosen m; requested_policy is
 * the policy planned with, AUTO kept as AUTO, while p.variant says what AUTO resolved to). */
struct snug_plan {
    const snug_graph *g;
    plan p;
    snug_plan_request request;
    snug_checkpoint_policy requested_policy;
    bool micro_batch_chosen;          /* the request left the micro-batch free */
    size_t share;                     /* samples of a global batch one rank takes (the largest share) */
    plan_memo *memo;                  /* what its request's searches settled, for its candidate table; owned */
};

/* snug_plan_new answering from memo (NULL: none) what a request settled before; the plan made owns no memo. */
snug_status plan_new_in(const snug_graph *g, const snug_plan_request *asked, plan_memo *memo, snug_plan **out,
                        snug_plan_shortfall *why, snug_error *err);
/* k = ceil(samples / m): the micro-batches of a window of `samples` samples. */
size_t plan_micro_batches(size_t samples, size_t m);
/* The largest micro-batch of g that may be planned (plan/request.c): its samples' inputs, layer outputs and
 * targets come to at most 1 EiB. 0 when one sample's do not. */
size_t plan_micro_batch_ceiling(const snug_graph *g);

/* Plans g at micro-batch m for a concrete variant. Fails on a graph without input or loss, or on overflow. */
snug_status plan_build(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                       const plan_variant *v, plan *p, snug_error *err);
/* For searches that only ask whether a plan stays under some total (a budget, the best so far) and compare
 * totals: plan_build, except that a plan whose totals with its live peak in place of the arena already pass
 * `ceiling` gets no offsets (its total is that lower bound), and that the offsets are not made final where
 * the arena is known without them (plan_assign_offsets' sizing); either way p->unplaced. Placing is most of a
 * plan's time, and a search throws most of its candidates away. A plan whose total is at most the ceiling has
 * plan_build's total, and plan_place gives it plan_build's offsets; SIZE_MAX is plan_build. */
snug_status plan_build_under(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                             const plan_variant *v, size_t ceiling, plan *p, snug_error *err);
/* The ceiling under which a plan's total is always exact, while its offsets may not be final. */
#define PLAN_EXACT_TOTAL (SIZE_MAX - 1)
/* An unplaced plan planned again in full (from its variant, which says all plan_build chose); a placed one is
 * left as it is. On failure *p is freed. */
snug_status plan_place(const snug_graph *g, const snug_optim_config *optim, plan *p, snug_error *err);
/* *p planned again (under ceiling) when it exceeds budget (non-zero): in bf16 with packed gradients where they
 * make it smaller (plan_build takes them only where they save a meaningful share), then, where it still exceeds
 * budget only with them, without pending rows and kept weights; on failure *p is freed. */
snug_status plan_within_budget(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                               size_t budget, size_t ceiling, plan *p, snug_error *err);
/* The variant of a user policy other than AUTO. */
/* A float32 variant of the policy, its product as a request that leaves it to snug (plan_variant_compute
 * changes both). */
plan_variant plan_variant_of(snug_checkpoint_policy policy);
void plan_free(plan *p);
/* Counts what the data sets hold in the plan's data category, what the runtime holds in its workspace, and both
 * in its total; false when the sums overflow. */
bool plan_add_beside(plan *p, size_t data_set_bytes, size_t runtime_bytes, size_t ring_slots);

/* Plans a user policy (plan/policy.c): AUTO searches within budget (0: none); the others are
 * plan_build_spared's. A plan over budget is planned again without pending rows: they are a speed-up that takes
 * only memory the budget leaves free. */
snug_status plan_build_policy(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                              snug_checkpoint_policy policy, plan_compute how, size_t budget, plan *p, snug_error *err);
/* The answers one request's searches settled (plan/memo.c): an AUTO search's variant at a micro-batch and
 * budget, a spared policy's. NULL everywhere means no memo. */
plan_memo *plan_memo_new(void);
void plan_memo_free(plan_memo *memo);
/* The variant settled for policy at m and budget that a plan under ceiling may take: true and *v filled. */
bool plan_memo_find(plan_memo *memo, size_t m, snug_checkpoint_policy policy, size_t budget, size_t ceiling,
                    plan_variant *v);
/* Keeps the variant a search settled; exact: as the search without a ceiling settles it. */
void plan_memo_keep(plan_memo *memo, size_t m, snug_checkpoint_policy policy, size_t budget, bool exact,
                    const plan_variant *v);

/* The same under a ceiling (plan_build_under): for a caller that only asks whether the plan fits; memo (or
 * NULL) answers what the request settled before and keeps what this search settles. */
snug_status plan_build_policy_under(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                    snug_checkpoint_policy policy, plan_compute how, size_t budget, size_t ceiling,
                                    plan_memo *memo, plan *p, snug_error *err);

/* A policy other than AUTO as given, except that SQRT and EVERY keep whole every segment whose recompute would
 * save no memory (plan/spare.c); under a ceiling as plan_build_under. */
snug_status plan_build_spared(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                              snug_checkpoint_policy policy, plan_compute how, size_t ceiling, plan *p, snug_error *err);

/* AUTO: the candidate with the least recompute whose total fits budget; if none does, the leanest. Under a
 * ceiling as plan_build_under. */
snug_status plan_build_auto(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                            plan_compute how, size_t budget, plan *p, snug_error *err);
/* plan_build_auto_under with the request's memo, for the policies it weighs (sqrt). */
snug_status plan_build_auto_in(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim, plan_compute how,
                               size_t budget, size_t ceiling, plan_memo *memo, plan *p, snug_error *err);
snug_status plan_build_auto_under(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                  plan_compute how, size_t budget, size_t ceiling, plan *p, snug_error *err);

/* Who reads each tensor (plan/reads.c), for the stages below. */
typedef struct plan_reads {
    int *slots;          /* per tensor: input slots of nodes other than views naming it, through views */
    bool *kept;          /* per tensor: a layer that keeps its input for backward reads it */
} plan_reads;
bool plan_reads_init(const snug_graph *g, plan_reads *r);
void plan_reads_free(plan_reads *r);
/* Whether node is the only node other than views that reads tensor t (directly or through views). */
bool plan_reads_only(const snug_graph *g, const plan_reads *r, snug_tensor t, int node);

/* Internal stages of plan_build, one file each. */
snug_status plan_segment(const snug_graph *g, const plan_reads *r, const plan_variant *v, plan_segments *s);
/* Forward FLOPs per sample of the layers a segmentation recomputes. */
double plan_segments_recompute_flops(const snug_graph *g, const plan_segments *s);
/* The forward FLOPs a micro-batch of m replays under the segments: the plan's recompute_flops, to the bit. */
double plan_recompute_flops(const snug_graph *g, const plan_segments *s, size_t m);
void plan_segments_free(plan_segments *s);
/* For the segmentation of v (EVERY, spared nothing) at micro-batch m with its first j segments recomputed, for
 * every j up to its *n segments: the recompute FLOPs, upto[j], as plan_recompute_flops gives them to the bit
 * (plan/leading.c). NULL when memory runs out; the caller frees it. */
double *plan_leading_recompute(const snug_graph *g, const plan_reads *r, const plan_variant *v, size_t m, int *n);
/* Which inputs are regenerated (needs the segments). */
bool plan_regen(const snug_graph *g, const plan_reads *r, plan *p);
/* The layer whose output consumer would regenerate (plan/regen.c), recompute aside, or -1; and the producer of
 * that layer's input, which regenerating reads. */
int plan_regen_producer(const snug_graph *g, const plan_reads *r, const plan_variant *v, int consumer);
int plan_regen_source(const snug_graph *g, int producer);
bool plan_schedule(const snug_graph *g, plan *p);     /* steps from the segments */
bool plan_lifetimes(const snug_graph *g, plan *p);    /* buffers, lifetimes, in-place sharing */
/* A new buffer without a lifetime yet; its index, or -2 when memory runs out. */
int plan_add_buf(plan *p, int node, act_kind kind, bool recomputed, size_t bytes);
/* bf16 (plan/packing.c). After a first walk of the lifetimes: a packed copy and an unpacked instance for every
 * output read after forward (the caller walks again); after the second: the packed copies' lifetimes. */
bool plan_pack_values(const snug_graph *g, plan *p);
void plan_pack_lifetimes(const snug_graph *g, plan *p);
/* bf16: the layers whose backward reads its input from the packed copy (before the fixed blocks: they need a
 * stage of workspace). */
bool plan_packed_inputs(const snug_graph *g, plan *p);
/* bf16 (plan/packed_grads.c): which activation gradients are stored in bfloat16 (before the buffers and the
 * fixed blocks: it halves the ones and adds stages to the other). */
bool plan_packed_grads(const snug_graph *g, plan *p);
/* Whether a plan with packed gradients is worth taking over the same plan with float32 ones (flat): it is
 * smaller and packs a gradient of at least a cache's size a sample (a budget that needs them gets them from
 * plan_within_budget). */
bool plan_packed_grads_pay(const snug_graph *g, const plan *packed, const plan *flat);
/* Whether no activation gradient of p is stored in bfloat16. */
bool plan_packs_no_grads(const snug_graph *g, const plan *p);
/* Whether node i's backward reads or writes a packed gradient, and the stage bytes it needs then (else 0). */
bool plan_node_packs_grads(const snug_graph *g, const plan *p, int i);
size_t plan_node_grad_stage(const snug_graph *g, const plan *p, int i);
/* bf16: the stage node i's forward makes an output the plan keeps only packed in (op_desc.out_stage_bytes), at
 * the gradient stage's place (forward and backward never run at once); else 0. */
size_t plan_node_out_stage(const snug_graph *g, const plan *p, int i);
/* Where in the workspace node i's gradient stage (and output stage) begins: after its own workspace and its
 * input's stages. */
size_t plan_node_grad_stage_at(const snug_graph *g, const plan *p, int i);
/* bf16: whether the input batch is rounded (not where a layer reads it as indices). */
bool plan_rounds_input(const snug_graph *g, const plan *p);
/* Greedy by size into one arena (plan/arena.c), after plan_live_peak. Sizing only (a search that keeps the plan
 * only for its total), the offsets may be left where the arena is known before they are final (p->unplaced). */
bool plan_assign_offsets(plan *p, bool sizing);

/* Checks that no two buffers live at the same step overlap in the arena (plan/overlap.c); returns an offending
 * pair's indices in *a, *b (a buffer past the arena's end as both), or false when there is none. Used by the tests
 * on every plan they make. */
bool plan_find_overlap(const plan *p, int *a, int *b);

/* Backward FLOPs per sample of one node: the op's own count, or 2x forward with parameters and 1x without. */
double plan_backward_flops(const snug_graph *g, const graph_node *n);
/* The workspace node i uses while it runs in plan p (its precision's, with the stages of an input it
 * regenerates or unpacks): what the plan's workspace is the largest of, and what a step of node i holds.
 * (size_t)-1 on overflow. */
size_t plan_node_workspace(const snug_graph *g, const plan *p, int i);
/* An op's sizes in a plan of variant v at micro-batch m (plan/op_sizes.c): its hooks for v's product where its
 * kernels depend on it (op_desc.by_product), else for v's number format. (size_t)-1 on overflow. */
size_t plan_op_workspace(const graph_node *n, const plan_variant *v, size_t m, int threads);
size_t plan_op_pending(const graph_node *n, const plan_variant *v, size_t m);
size_t plan_op_kept(const graph_node *n, const plan_variant *v, size_t m);
/* Stage bytes for an input it regenerates or unpacks; 0: it cannot (op_desc.regen_stage_bytes). */
size_t plan_op_stage(const graph_node *n, const plan_variant *v, size_t m, int threads);
/* The stage the plan reserves for that input: plan_op_stage where it is regenerated, else what a bf16 plan's
 * kernels need to read it from its packed copy (op_desc.bf16_packed_stage_bytes; 0 where they read it as it
 * lies). */
size_t plan_op_input_stage(const graph_node *n, const plan_variant *v, size_t m, int threads, bool regenerated);
/* Whether the op sizes a stage for an input read sample by sample at all. */
bool plan_op_has_stage(const graph_node *n);
/* Whether a bf16 plan of variant v would have the op's backward read its input packed inside its products, with
 * no stage (op_product_sizes.reads_packed). */
bool plan_op_reads_packed_unstaged(const graph_node *n, const plan_variant *v);
/* Whether node i (n) of plan p takes its input in backward through a stage: regenerated into it, or unpacked
 * into it from the packed copy (not where its products read the copy as it lies). */
bool plan_input_staged(const graph_node *n, const plan *p, int i);
struct snug_plan;
/* The plan's peak (plan/inventory.c): the most bytes in use at one step of its schedule, every category, as
 * snug_plan_step counts them, and the first step that holds it. */
void plan_peak(const struct snug_plan *sp, size_t *peak, size_t *at);

#endif
