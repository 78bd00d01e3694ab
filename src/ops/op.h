/* Ops as tables: each op family fills one op_desc. An op never allocates: the executor binds every pointer in
 * op_call from the plan, and an op reads only what the table says it keeps. Layouts are row-major, batch first
 * (N, C, H, W) and (N, features). Backward always ADDS into din and dw: fan-out and accumulation over
 * micro-batches then need no special code; the trainer zeroes parameter gradients once per optimizer step and
 * the executor zeroes activation gradients before each backward, except where the first writer of one can
 * write it whole (OP_WRITES_FRESH, op_call.din_fresh; OP_WRITES_DW_FRESH, op_call.dw_fresh): a pass over memory
 * saved per gradient. */
#ifndef SNUG_OPS_OP_H
#define SNUG_OPS_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/shape.h"
#include "ops/node.h"

/* Flags: what an op's backward reads besides dout. The planner keeps exactly these alive until backward. */
enum {
    OP_KEEPS_INPUT = 1u << 0,   /* backward reads in[] (linear, conv2d) */
    OP_KEEPS_OUTPUT = 1u << 1,  /* backward reads out (relu) */
    OP_IS_VIEW = 1u << 2,       /* output aliases the input buffer, gradient too (flatten): no kernel runs */
    OP_IS_LOSS = 1u << 3,       /* reads targets; out is the per-item loss; backward seeds the gradient */
    OP_IS_INPUT = 1u << 4,      /* the graph input: filled by the batcher */
    OP_ELEMENTWISE = 1u << 5,   /* out[i] depends on in[..][i] only: out may share in[0]'s buffer when in[0]
                                   has no later use (ReLU in place), and the op is cheap to recompute */
    OP_GRAD_PASSTHROUGH = 1u << 6, /* backward's din[0] is dout itself (residual add): the planner may give
                                      in[0]'s gradient dout's memory, and the op then skips din[i] == dout */
    OP_REPLAYS_SAVED = 1u << 7, /* a recompute reads the per-sample saved bytes its first forward wrote instead of
                                   writing them again (a normalisation's statistics): the planner keeps that one
                                   buffer from forward to backward, and the replay skips a pass over its input */
    OP_WRITES_FRESH = 1u << 8,  /* backward honours op_call.din_fresh: it can write an input gradient whole
                                   instead of adding into it, so the executor need not zero it first */
    OP_REGEN_INPUT = 1u << 9,   /* backward can take in[0] sample by sample from op_call.regen instead of keeping
                                   it (conv2d after a normalisation, a transformer's linear after LayerNorm or
                                   GELU): see op_desc.regen */
    OP_READS_INDICES = 1u << 10,/* in[0] holds indices, not values (an embedding's tokens): never rounded to
                                   bfloat16 */
    OP_READS_PACKED = 1u << 11, /* backward can take in[0] from its bfloat16 copy (op_call.in_packed): sample
                                   by sample into the stage regen_stage_bytes sizes (conv2d), a span at a
                                   time as it reads it where the op has no regen_stage_bytes (GELU), or inside
                                   its products (a linear layer: op_product_sizes.reads_packed) */
    OP_GRAD_IN_PLACE = 1u << 12,/* backward can write din[0] over dout: element i of din[0] depends on element
                                   i of dout and of the kept values only, written whole (op_call.din_fresh).
                                   The planner gives in[0]'s gradient dout's memory where dout dies at this
                                   step and in[0]'s gradient begins there (GELU's backward) */
    OP_FORWARD_READS_PACKED = 1u << 13, /* forward can take its inputs from their bfloat16 copies
                                   (op_call.packed.in): a concatenation copying them, a convolution sample by
                                   sample into the stage regen_stage_bytes sizes, a GroupNorm a group at a time
                                   into a stage of its bf16 workspace */
    OP_WRITES_PACKED = 1u << 14,/* forward can write its output in bfloat16 only (op_call.packed.out) for
                                   readers that all read it packed: a concatenation of rounded values, a
                                   GroupNorm rounding each plane from its stage */
    OP_GRAD_READS_PACKED = 1u << 15, /* backward can read its output's gradient from a bfloat16 buffer
                                   (op_call.grads.dout): a sample (or block) at a time into a float32 stage */
    OP_GRAD_WRITES_PACKED = 1u << 16,/* backward can write its inputs' gradients into bfloat16 buffers
                                   (op_call.grads.din): computed in float32 in a stage (from the buffer's
                                   values where it adds into them), rounded as it is stored */
    OP_ROUNDS_OUTPUT = 1u << 17,/* bf16 forward honours op_call.packed.round: the op rounds its output (and
                                   writes its packed copy, packed.copy) while the values it just wrote are
                                   still in cache, instead of the executor's pass over the whole output
                                   (ops/round_output.h) */
    OP_WRITES_DW_FRESH = 1u << 18, /* backward honours op_call.dw_fresh: where it is the first writer of its
                                   parameters' gradients in a window, it writes them whole over the last
                                   window's values, so the update leaves them unzeroed */
    OP_READS_OUTPUT_PACKED = 1u << 19, /* backward can take its kept output (OP_KEEPS_OUTPUT) from its bfloat16
                                   copy (op_call.out_packed) as it reads it: the mask of a ReLU, whose
                                   sign the copy holds exactly; then out is NULL and no float32 instance of
                                   it is unpacked for backward */
};

/* bf16 forward where the plan keeps values only in their bfloat16 copies around a step (plan.fwd_packed,
 * plan.packed_only): no float32 instance of them exists, so these stand in for in[i] and out (then NULL). */
typedef struct op_packed_io {
    const uint16_t *in[NODE_MAX_INPUTS];
    uint16_t *out;
    /* OP_ROUNDS_OUTPUT in a bf16 forward (and a recompute's): round says the op rounds out itself through
     * op_round_output, copy (or NULL) is the packed copy of out the plan keeps, written in the same pass. */
    bool round;
    uint16_t *copy;
    /* where out is NULL (only packed) and the op sizes one (op_desc.out_stage_bytes): the float32 stage its
     * forward makes the output in before rounding it into out's packed values */
    void *stage;
} op_packed_io;

/* bf16 backward where the plan stores activation gradients in bfloat16 (plan.grad_packed, plan/packed_grads.c):
 * these stand in for dout and din[i] (then NULL), and stage is the float32 scratch the op sized with
 * op_desc.grad_stage_bytes (ops/packed_grads.h reads and writes a sample through it). */
typedef struct op_packed_grads {
    const uint16_t *dout;
    uint16_t *din[NODE_MAX_INPUTS];
    void *stage;
} op_packed_grads;

/* The matrix product a plan's linear layers take: the plan's choice (plan/products.c, from its request and the
 * CPU), never the process's, so that a plan depends only on its graph, its request and the machine. */
typedef enum op_product {
    OP_PRODUCT_BLAS = 0, /* the BLAS, float32 (and the unpacked products of few rows where the CPU has AVX-512) */
    OP_PRODUCT_SGEMM,    /* snug's packed float32 product (kernels/sgemm.h): AVX-512 only */
    OP_PRODUCT_BGEMM,    /* bf16 plans: snug's bfloat16 product (kernels/bgemm.h), on every row count */
} op_product;

/* Everything one op invocation touches, bound by the executor. Shapes come from node. */
typedef struct op_call {
    const op_node *node;
    size_t m;                          /* samples in this micro-batch (at most the planned m) */
    int threads;                       /* OpenMP threads the plan sized the workspace for */
    const float *in[NODE_MAX_INPUTS];  /* (m, in shape) */
    float *out;                        /* (m, out shape) */
    float *din[NODE_MAX_INPUTS];       /* gradients of the inputs, or NULL when none is needed */
    const float *dout;                 /* gradient of out (NULL for a loss) */
    unsigned din_fresh;                /* bit i: din[i] holds no gradient yet (stale memory), and backward
                                          writes every element of it instead of adding; only for ops with
                                          OP_WRITES_FRESH, and with the bits of adding into zeros */
    unsigned dw_fresh;                 /* bit i: dw[i] holds the last window's gradient (the update left it
                                          for its first writer), and backward writes every element of it
                                          instead of adding; only for ops with OP_WRITES_DW_FRESH, the first
                                          backward of a window, with the bits of adding into zeros */
    const float *w[NODE_MAX_PARAMS];   /* parameters, in the order the op declared them */
    float *dw[NODE_MAX_PARAMS];        /* their gradients (NULL for a non-trainable buffer) */
    float *state[NODE_MAX_PARAMS];     /* non-trainable buffers (BatchNorm's running statistics), writable;
                                          NULL for trainable parameters. w[i] points to the same memory. */
    void *saved;                       /* op-private bytes kept from forward to backward: saved_bytes * m */
    void *work;                        /* scratch for this call only: workspace_bytes(node, m, threads) */
    void *pending;                     /* pending_bytes, kept across the micro-batches of a window (zero at
                                          the first); NULL when the op has none or runs outside a trainer */
    void *kept;                        /* kept_bytes (zero when first bound); NULL when the op has none, the
                                          plan left them out, or it runs outside a trainer */
    uint64_t weights_version;          /* changes whenever the parameters may have (every window and
                                          evaluation): what kept derives from them is stale unless it was
                                          derived under this version */
    const uint16_t *out_packed;        /* backward of an OP_READS_OUTPUT_PACKED op whose kept output the plan
                                          keeps only packed (plan.packed_out): out in bfloat16, out NULL */
    const uint16_t *in_packed;         /* backward of an OP_READS_PACKED op whose input the plan keeps only
                                          packed (plan.packed_in): in[0] in bfloat16, and in[0] is NULL (also
                                          in the call a consumer's regen receives) */
    op_packed_io packed;               /* forward of an OP_FORWARD_READS_PACKED op in a bf16 plan: the inputs
                                          (and the output) it reads (writes) in bfloat16 only */
    op_packed_grads grads;             /* backward in a bf16 plan: the gradients it reads (writes) in bfloat16
                                          only (OP_GRAD_READS_PACKED, OP_GRAD_WRITES_PACKED) */
    const struct op_call *regen;       /* backward of an OP_REGEN_INPUT op whose plan regenerates its input
                                          (plan.regen): the producer's own backward call, whose op_desc.regen
                                          writes any sample of in[0]; in[0] is then NULL. Else NULL. */
    /* Random ops (dropout): the counter-based RNG key. A draw is a function of (seed, step, node, and the
     * element's index in the whole global batch: micro * per-sample numel + index in the micro-batch), so a
     * recompute replays the same mask, and the mask does not depend on how the batch is split. */
    uint64_t seed;
    uint64_t step;                     /* global batches processed (skipped steps included) */
    uint64_t micro;                    /* the micro-batch's first sample, counted within the global batch */
    bool training;                     /* false in evaluation: dropout is the identity, BatchNorm uses its
                                          running statistics */
    bool bf16;                         /* the run rounds every output to bfloat16 as it is made (the op itself
                                          where packed.round says so, else the executor after forward): what
                                          regen writes is rounded the same way */
    op_product product;                /* the plan's matrix product (ops with op_desc.by_product) */
    bool recompute;                    /* this forward replays a checkpointed segment: it must write the same
                                          output bits and change no state (BatchNorm reuses the statistics it
                                          saved in the first forward and leaves its running statistics alone) */
    /* Loss ops only. */
    const int32_t *targets;            /* (m) class indices; SNUG_IGNORE_TARGET items count for nothing */
    float loss_scale;                  /* 1 / N, N the item count of the whole global batch */
} op_call;


/* The sizes of an op whose kernels depend on the plan's matrix product (linear's): op_desc's hooks of the same
 * names with that choice, which the planner asks instead of them (plan/op_sizes.c). */
typedef struct op_product_sizes {
    size_t (*workspace_bytes)(const op_node *n, size_t m, int threads, op_product product);
    size_t (*pending_bytes)(const op_node *n, size_t m, op_product product);
    size_t (*regen_stage_bytes)(const op_node *n, size_t m, int threads, op_product product);
    size_t (*kept_bytes)(const op_node *n, size_t m, op_product product); /* bgemm's: the weights in bf16 */
    /* With OP_READS_PACKED: whether under this product backward reads its input from the packed copy
     * (op_call.in_packed) inside its products, with no stage at all (a linear layer's weight gradient through
     * snug's products, which widen the bfloat16 as they pack it). NULL: never. */
    bool (*reads_packed)(const op_node *n, op_product product);
} op_product_sizes;

typedef struct op_desc {
    const char *kind;  /* "conv2d": the name users see in messages and model files */
    unsigned flags;
    /* Output shape from input shapes; declares parameters into params[*n_params]. On an error, writes a message
     * into msg (the caller prefixes the node name) and returns its status: SNUG_E_SHAPE when the input shapes do
     * not fit the op (or its parameters, as groups that do not divide the channels), SNUG_E_ARG when a parameter
     * is out of its range whatever the input (eps, momentum, p, a stride or a group count of 0). */
    snug_status (*infer)(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                         int *n_params, char *msg, size_t msg_len);
    void (*forward)(const op_call *c);
    void (*backward)(const op_call *c);
    /* Forward FLOPs per sample (a multiply-add counts 2); backward is counted by the planner as 2x for ops
     * with parameters and 1x otherwise. */
    double (*flops)(const op_node *n);
    /* Backward FLOPs per sample when the rule above is wrong for the op (attention: about 2.5x forward without
     * parameters); NULL to use the rule. */
    double (*backward_flops)(const op_node *n);
    /* Bytes per sample the op keeps from forward for backward beyond in/out (max-pool argmax, norm statistics). */
    size_t (*saved_bytes)(const op_node *n);
    /* Bytes kept from forward for backward once per micro-batch, whatever m is (BatchNorm's batch mean and
     * inverse deviation); NULL for none. c->saved holds these first, then saved_bytes * m. A recompute sees the
     * bytes its first forward saved here (and must reuse them, not recompute them). */
    size_t (*saved_batch_bytes)(const op_node *n);
    /* Scratch bytes for one call at micro-batch m with `threads` threads (0 if none). */
    size_t (*workspace_bytes)(const op_node *n, size_t m, int threads);
    /* The same in a bf16 plan (op_call.bf16), where the op's products take other kernels; NULL: as above. */
    size_t (*bf16_workspace_bytes)(const op_node *n, size_t m, int threads);
    /* Weight-gradient contributions an op defers from backward to the end of the window at micro-batch m
     * (linear's rank-1 to rank-3 updates, applied as one product): bytes kept across micro-batches, counted as
     * gradients; 0 or NULL for none. The planner drops them where a budget has no room (plan_variant's
     * no_window_extras), so they never decide whether a micro-batch fits. flush applies them to dw and leaves
     * the bytes as at the window's start; the trainer calls it once after the window's last backward, with the
     * op's backward call. A backward without c->pending applies its contributions at once: the same bits. */
    size_t (*pending_bytes)(const op_node *n, size_t m);
    /* The same in a bf16 plan, where the op's products may take other kernels (linear's through bgemm defer
     * nothing); NULL: as above. */
    size_t (*bf16_pending_bytes)(const op_node *n, size_t m);
    void (*flush)(const op_call *c);
    /* Bytes derived from the op's parameters alone that it keeps across the micro-batches of a window at
     * micro-batch m instead of deriving them again for each (Winograd's transformed weights; a bf16 plan's
     * linear weights rounded to bf16, through op_product_sizes), counted as
     * params; 0 or NULL for none. Dropped with the pending rows where a budget has no room. The op tags what
     * it derives with c->weights_version and derives it again when that has changed. */
    size_t (*kept_bytes)(const op_node *n, size_t m);
    /* Ops whose kept block holds w[0] rounded to bfloat16 as their products read it (linear's in a bf16 plan):
     * where in `kept` those values lie (w[0]'s layout), and in *version the word saying under which weights
     * version they were rounded. A writer of w[0] that writes the copy as it writes w[0] (the optimizer's
     * update) sets that word, and the op does not round them again. NULL for other ops. */
    uint16_t *(*kept_bf16_weight)(void *kept, uint64_t **version);
    /* Producers whose output is a cheap per-sample function of what their own backward keeps (a
     * normalisation: its kept input, its saved statistics, its parameters): writes sample n of the output as
     * the forward wrote it, bit for bit, from the producer's backward call c; part t of T of the threads of an
     * enclosing region each writes its share of the planes. NULL where the output cannot be regenerated. */
    void (*regen)(const struct op_call *c, size_t n, float *dst, size_t t, size_t T);
    /* Consumers with OP_REGEN_INPUT: the workspace bytes their backward needs beyond workspace_bytes to hold
     * regenerated input samples at micro-batch m (SIZE_MAX on overflow; 0: this node cannot regenerate its
     * input). The planner adds them where it regenerates that node's input. */
    size_t (*regen_stage_bytes)(const op_node *n, size_t m, int threads);
    /* The same in a bf16 plan where the input is not regenerated but only read from its packed copy
     * (op_call.in_packed, op_call.packed.in): less where the op's bf16 kernels read bfloat16 as it lies (0: no
     * stage at all). NULL: regen_stage_bytes. */
    size_t (*bf16_packed_stage_bytes)(const op_node *n, size_t m, int threads);
    /* Ops with OP_GRAD_READS_PACKED or OP_GRAD_WRITES_PACKED: the float32 stage (op_call.grads.stage) their
     * backward needs at micro-batch m to read and write packed gradients (SIZE_MAX on overflow); NULL for
     * none (they convert in blocks on the stack). The planner adds it where it packs one of them.
     * input_staged: the plan also gives backward regen_stage_bytes for its input (op_call.regen or
     * op_call.in_packed), which the op may reuse for a gradient once it is done with the input. */
    size_t (*grad_stage_bytes)(const op_node *n, size_t m, int threads, bool input_staged);
    /* Ops with OP_WRITES_PACKED that make their output in float32 before rounding it: the stage
     * (op_packed_io.stage) their forward needs at micro-batch m to write only packed values (SIZE_MAX on
     * overflow); NULL for none. The planner gives it the bytes of the gradient stage (backward's), where the
     * plan keeps the output only packed. */
    size_t (*out_stage_bytes)(const op_node *n, size_t m, int threads);
    /* Ops whose kernels the plan's matrix product decides (op_call.product): their sizes for each choice, in
     * place of workspace_bytes, bf16_workspace_bytes, pending_bytes, bf16_pending_bytes and regen_stage_bytes
     * (then NULL). NULL for every other op. */
    const op_product_sizes *by_product;
    /* How the op folds with a ReLU beside it: graph/fuse.c decides every fold from these alone. */
    struct {
        const struct op_desc *relu_after;   /* this op also applying the ReLU that is its output's only reader
                                               (BatchNorm, GroupNorm, add) */
        const struct op_desc *relu_before;  /* this op rectifying its input as it loads it (max-pool), where
                                               relu_before_fits says the windows allow it */
        bool (*relu_before_fits)(const op_node *n);
        const struct op_desc *unfolded;     /* a folded op, on either side of a fold: the plain op it stands for */
        bool hides_values;                  /* a folded op whose output is not its layer's own values (the
                                               normalisation's are rectified, the pooled ReLU's are not yet): a
                                               new reader of them undoes the fold */
        const struct op_desc *view_after;   /* a ReLU: what it becomes folded into the op before it */
        const struct op_desc *view_before;  /* a ReLU: what it becomes folded into the op after it */
    } fold;
} op_desc;

extern const op_desc op_input;
extern const op_desc op_linear;
extern const op_desc op_conv2d;
extern const op_desc op_relu;
extern const op_desc op_maxpool2d;
extern const op_desc op_flatten;
extern const op_desc op_softmax_xent;
extern const op_desc op_add;
extern const op_desc op_dropout;
extern const op_desc op_conv_transpose2d;
extern const op_desc op_concat;
extern const op_desc op_global_avgpool;
extern const op_desc op_upsample_nearest2d;
extern const op_desc op_gelu;
extern const op_desc op_sigmoid;
extern const op_desc op_tanh;
extern const op_desc op_scale_shift;
extern const op_desc op_embedding;
extern const op_desc op_position_embedding;
extern const op_desc op_linear_tied;
extern const op_desc op_batchnorm2d;
/* Element-wise arithmetic of two operands that broadcast (ops/binary.c); add of one shape is op_add. */
extern const op_desc op_add_broadcast;
extern const op_desc op_sub;
extern const op_desc op_mul;
extern const op_desc op_div;
extern const op_desc op_mul_by_const;  /* x * c, x / c with a constant c: they keep nothing */
extern const op_desc op_div_by_const;
/* The folded forms (op_desc.fold): */
extern const op_desc op_batchnorm2d_relu; /* BatchNorm with the ReLU after it folded in */
extern const op_desc op_groupnorm_relu;   /* GroupNorm likewise */
extern const op_desc op_add_relu;         /* add likewise */
extern const op_desc op_relu_folded;      /* such a ReLU: a view of the normalisation's output */
extern const op_desc op_maxpool2d_relu;   /* a max-pool with the ReLU before it folded in */
extern const op_desc op_relu_pooled;      /* such a ReLU: a view of its input, the values before the ReLU */
extern const op_desc op_groupnorm;
extern const op_desc op_layernorm;
extern const op_desc op_attention;
extern const op_desc op_permute;
extern const op_desc op_slice;
extern const op_desc op_reshape;
extern const op_desc op_softmax;
extern const op_desc op_matmul;

/* Shape helpers for op implementations. */
static inline const snug_shape *op_in_shape(const op_call *c, int i) { return &c->node->in_shape[i]; }
static inline const snug_shape *op_out_shape(const op_call *c) { return &c->node->out_shape; }
static inline size_t op_in_numel(const op_call *c, int i) { return c->node->in_numel[i]; }
static inline size_t op_out_numel(const op_call *c) { return c->node->out_numel; }

#endif
