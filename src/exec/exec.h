/* The executor: reserves a plan's blocks, binds every schedule step's op call once, then runs forward and
 * backward (with recompute) over a micro-batch of any size up to the planned m, allocating nothing. */
#ifndef SNUG_EXEC_EXEC_H
#define SNUG_EXEC_EXEC_H

#include "core/mem.h"
#include "ops/op.h"
#include "plan/plan.h"

/* The random key of one micro-batch: dropout masks are a function of it, so recompute replays them. micro is
 * the micro-batch's first sample within the global batch (see op_call). */
typedef struct exec_key {
    uint64_t seed, step, micro;
    bool training;
} exec_key;

/* Called after each forward step (not recompute) with the step's node and its output's float32 instance for the
 * first m samples, already rounded in bf16 and before any reader runs: a test reads or adjusts it there
 * (tests/test_precision.c holds two runs to the same ReLU and max-pool decisions). NULL in every other use. */
typedef void (*exec_watch_fn)(void *ctx, const op_node *node, float *out, size_t m);

typedef struct exec {
    const snug_graph *g;
    const plan *p;
    char *arena;              /* activations, at the plan's offsets */
    float *params, *grads, *optim_state;
    float *state;             /* non-trainable buffers (running statistics) */
    float *state_before;      /* their copy from the window's start (the trainer's: a skipped window restores it) */
    float *input;             /* (m, input shape): the batcher writes here */
    int32_t *targets;         /* (m, targets per sample) */
    float *ring_inputs;       /* (ring slots, input buffer): micro-batches read ahead (train/prefetch.c); NULL */
    int32_t *ring_targets;    /* (ring slots, targets buffer) */
    void *workspace;
    char *pending;            /* the ops' deferred weight-gradient rows (plan.pending_at), counted as grads */
    char *kept;               /* the ops' weights kept across a window (plan.kept_at), counted as params */
    uint64_t weights_version; /* op_call.weights_version: exec_weights_changed advances it */
    bool *param_fresh;        /* per graph parameter: its gradient's first writer in backward writes it whole
                                 where the gradients are stale (OP_WRITES_DW_FRESH, op_call.dw_fresh) */
    bool grads_stale;         /* exec_grads_left_stale: the next backward's first writers write whole */
    int *unpack_start;        /* bf16, per step: the buffers unpacked from a packed copy before it are */
    int *unpack_list;         /* unpack_list[unpack_start[s] .. unpack_start[s + 1]) */
    op_call *calls;           /* per schedule step */
    int *zero_start;          /* per step: its gradient buffers to zero first are zero_list[zero_start[s] ..
                                 zero_start[s + 1]) */
    int *zero_list;
    const float *item_loss;   /* the loss op's per-item output, valid after forward */
    const float *logits;      /* the loss op's input, valid after forward */
    exec_watch_fn watch;      /* a test's observer of forward (above), with its context; NULL */
    void *watch_ctx;
    bool profiling;           /* exec_profile: training calls are timed into op_seconds and op_calls */
    double *op_seconds;       /* per schedule step, once profiling started (else NULL): the wall time of its
                                 calls in training steps (evaluation is not timed) */
    long *op_calls;
} exec;

/* Reserves every block of p from mem (params, grads, optim, data, workspace, activation arena) and binds the
 * steps. On SNUG_E_OOM, err names the block that did not fit (the caller adds the hint). */
snug_status exec_bind(exec *x, const snug_graph *g, const plan *p, snug_mem *mem, snug_error *err);
void exec_unbind(exec *x);

/* Forward over the first m samples of the input buffer. */
void exec_forward(exec *x, size_t m, const exec_key *key);
/* Backward (with the plan's recompute) from the loss, scaled by loss_scale (1/N), adding into the parameter
 * gradients. key must be the one forward used. Some contributions may be pending until exec_flush. */
void exec_backward(exec *x, size_t m, float loss_scale, const exec_key *key);
/* Where a checked pass met its first non-finite value: in the output of node (input -1) during forward, or in
 * the gradient of its input `input` during backward; sample is the position within the micro-batch. */
typedef struct exec_nonfinite {
    const op_node *node;
    int input;
    size_t sample;
    float value;
} exec_nonfinite;

/* Forward then backward as above, each step's output (forward) or input gradients (backward) checked as it is
 * written, stopping at the first non-finite value: true and *where filled, or false when none. A diagnosis, not
 * a training pass: it adds into the parameter gradients and may leave pending contributions and the running
 * statistics changed; the caller restores what it keeps. */
bool exec_find_nonfinite(exec *x, size_t m, float loss_scale, const exec_key *key, exec_nonfinite *where);
/* Applies every op's pending contributions to the parameter gradients (after a window's last backward). */
void exec_flush(exec *x);
/* The parameters may have changed (an optimizer step, the caller's writes through its pointers): what the
 * ops keep derived from them is stale. The trainer calls it at the start of every window and evaluation. */
void exec_weights_changed(exec *x);
/* The kept bfloat16 copy of node's first parameter (op_desc.kept_bf16_weight: a bf16 plan's linear weight), or
 * NULL where the plan keeps none. */
uint16_t *exec_kept_bf16_weight(const exec *x, int node);
/* That copy holds the rounding of the parameter as it is now (its writer wrote both together, after the last
 * exec_weights_changed): the op reads it as it is instead of rounding it again. */
void exec_kept_bf16_weight_current(exec *x, int node);
/* Whether graph parameter i's gradient is written whole by its first writer after exec_grads_left_stale: the
 * update may leave it holding the last window's values instead of zeroing it. */
bool exec_param_written_fresh(const exec *x, int i);
/* The parameter gradients that exec_param_written_fresh names hold the last window's values (the update did
 * not zero them), every other one is zero: the next backward's first writers write theirs whole. Any backward
 * clears it (its later micro-batches add). */
void exec_grads_left_stale(exec *x);
/* Starts timing every op call of training micro-batches (the totals cleared) or stops it (the totals kept until
 * the next start). False when the timers cannot be allocated. */
bool exec_profile(exec *x, bool on);

#endif
