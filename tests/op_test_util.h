/* Shared by the op gradient tests: bind one node of a tiny graph by hand and check its gradients against
 * central finite differences.
 *
 * A fixture owns one buffer per distinct input tensor of the node (an op whose two inputs are one tensor, such
 * as add(x, x), gets one buffer bound to both, and its gradient buffer bound to both din), the output, a random
 * output weighting R, the parameters and their gradients, and the saved and workspace bytes sized exactly from
 * the op table, so ASan catches an op that overruns them. The checked loss is L = sum(out * R); for a loss op,
 * L = loss_scale * sum(out). */
#ifndef SNUG_TESTS_OP_TEST_UTIL_H
#define SNUG_TESTS_OP_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"
#include "ops/op.h"

typedef enum fill_kind {
    FILL_PLAIN,      /* uniform [-1, 1) */
    FILL_AWAY_ZERO,  /* |x| in [0.1, 1): a step of 1e-2 never crosses relu's kink */
    FILL_DISTINCT,   /* a shuffled ramp with gaps of 0.05: a step of 1e-2 never changes a max-pool argmax */
} fill_kind;

typedef struct op_fixture {
    snug_graph *g;
    const graph_node *node;
    const op_desc *op;
    size_t m_plan, out_n;
    int n_in;                            /* the node's inputs */
    int owner[NODE_MAX_INPUTS];          /* input i uses the buffers of input owner[i] (<= i) */
    size_t in_n[NODE_MAX_INPUTS];        /* elements per sample of input i */
    float *x[NODE_MAX_INPUTS], *dx[NODE_MAX_INPUTS];  /* (m_plan, in_n[i]), shared where owner[i] != i */
    float *y, *r;                        /* (m_plan, out_n) */
    float *w[NODE_MAX_PARAMS], *dw[NODE_MAX_PARAMS];
    size_t wn[NODE_MAX_PARAMS];
    int n_w;
    int32_t *targets;                    /* (m_plan) */
    void *saved, *work;
    op_call c;
} op_fixture;

/* The next value of a splitmix64 sequence. */
uint64_t op_test_rng_next(uint64_t *s);
/* n values uniform in [-1, 1). */
void op_test_fill_sym(float *v, size_t n, uint64_t *s);
/* malloc that fails the test on NULL; never NULL for 0 bytes. */
void *op_test_xmalloc(size_t bytes);
/* n values of op_test_fill_sym rounded to bfloat16, in a new buffer (the operands of the bf16 kernels' tests). */
float *op_test_bf16_filled(size_t n, uint64_t *s);
/* The product a float32 plan that leaves it to snug takes on this CPU, which the fixtures' calls carry, and an
 * op's workspace in such a plan. */
op_product op_test_product(void);
size_t op_test_workspace(const graph_node *n, size_t m, int threads);

/* Binds node `node` of g (which it takes over) for a planned micro-batch m_plan and `threads` threads; the call
 * runs with c.m = m_plan until the test changes it. Inputs are filled per `kind`, R and the parameters
 * uniformly, all from `seed`. */
void op_fixture_init(op_fixture *f, snug_graph *g, int node, size_t m_plan, int threads, fill_kind kind,
                     uint64_t seed);
void op_fixture_free(op_fixture *f);

/* L for the current inputs and parameters (runs forward), accumulated in double. */
double op_fixture_loss(op_fixture *f);
/* Zeroes every input and parameter gradient (all m_plan rows). */
void op_fixture_zero_grads(op_fixture *f);
/* Zeroed gradients, then forward and one backward. */
void op_fixture_analytic(op_fixture *f);

/* Compares grad (n values) with central differences of L in every element of v; the bound is tol relative to
 * the element's finite difference plus the mean magnitude. */
void op_check_fd(op_fixture *f, float *v, const float *grad, size_t n, float h, double tol, const char *what);
/* Runs m_run samples and checks the gradient of every distinct input (and that rows past m_run stay zero) and
 * of every parameter. */
void op_check_all(op_fixture *f, size_t m_run, float h, double tol);
/* Two backward calls without zeroing in between give twice the gradients of one; and an op with
 * OP_WRITES_FRESH writes fresh input gradients (op_call.din_fresh) with the bits of adding into zeros. */
void op_check_backward_adds(op_fixture *f);
/* Backward of f's call with x read from its packed copy (op_call.in_packed, in[0] NULL) gives the bits of reading
 * the float32 instance (which must hold the same bfloat16 values): adding into an input gradient that starts at
 * scale * r, and writing it fresh (din_fresh) over NaN. want and got: n floats each; want ends with the fresh
 * gradient. */
void op_expect_packed_input_same_bits(const op_fixture *f, const uint16_t *packed, float *want, float *got, size_t n,
                                      float scale);
/* A consumer's regeneration of sample 1 of f's output (op_desc.regen) from x's packed copy, in three parts, gives
 * the bits of a bf16 forward's output (rounded). want and got: an output sample each. */
void op_expect_packed_regen_same_bits(const op_fixture *f, const uint16_t *packed, float *want, float *got);

/* b's output and every input and parameter gradient have the bits of a's, over a's c.m samples (the same op
 * and shapes, both run). */
void op_expect_same_results(const op_fixture *a, const op_fixture *b);

/* Node 1 of make()'s graph (a fresh one per call) has one sample whose scratch exceeds 64 MiB: its workspace at
 * micro-batch 2 on 2 threads is the one slot of micro-batch 1 (the threads share each sample), and 2 threads
 * give the bits of 1, at m = 2, inputs and parameters from `seed`. */
void op_expect_large_sample_one_slot(snug_graph *(*make)(void), uint64_t seed);

/* snug_graph_check(g) fails with `status` and a message that holds every string of the NULL-terminated list
 * `needles`; frees g. */
void op_expect_error(snug_graph *g, snug_status status, const char *const *needles);

#endif
