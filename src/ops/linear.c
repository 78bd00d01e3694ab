/* linear: y = x W^T + b over the last dimension, (in) -> (out) and (tokens, in) -> (tokens, out): one GEMM over
 * all m * tokens rows (the BLAS spreads it over the threads). A rank-3 input is refused with a hint: an image
 * into a linear layer is almost always a forgotten flatten, and shapes never get reinterpreted silently.
 *
 * linear_tied: y = x W^T with no bias, W (vocab, dim) the weight of an embedding layer (GPT's tied output head,
 * built by snug_linear_tied). The node declares no parameter of its own: the builder shares the embedding's
 * weight with it (graph_share_param), so w[0] and dw[0] are the embedding's, and backward adds into the same
 * gradient the embedding's backward adds into. Its shape comes from params.embedding = {vocab, dim}, which the
 * builder copies from the embedding (shape inference cannot see other nodes).
 *
 * Both keep their input for dW (OP_KEEPS_INPUT) and nothing else.
 *
 * In a bf16 plan a linear layer of a sequence's tokens reads an input kept only packed (a GELU's output) and
 * writes only a packed output (for a GELU that reads it packed) a sample at a time through its stage (through
 * sgemm, a packed input with a float32 output is one product that widens the input as it packs it), and reads
 * and writes its activation gradients in bfloat16 (op_call.grads) a sample at a time too: a transformer's MLP
 * then holds no float32 instance of its widest tensors, forward or backward.
 *
 * Few rows and a wide layer: packing the weight into panels on every call costs more than the product itself
 * when so few rows multiply it, and accumulation pays for it once per micro-batch. Up to LINEAR_DIRECT_MAX_ROWS
 * rows the forward goes through gemm_direct_nt (dot products over the weight's rows in place, no packing), and
 * up to LINEAR_DIRECT_GRAD_MAX_ROWS din and dW through gemm_direct's broadcast kernel (dW a rank-1..3 update
 * below 4 rows). Outputs narrower than 32 (too short an inner dimension for din) skip these paths. Everything
 * else goes through the plan's product (op_call.product): sgemm on AVX-512, the BLAS without it or where the
 * plan's request chose it, bgemm (every row count) in bf16 plans that take it.
 *
 * Each element is a sum in a fixed order, so the bits do not depend on the thread count. sgemm's elements and
 * gemm_direct's are each one chain over k, so din and dW have the same bits on every path, and a sample's
 * output does not depend on how many rows share its call within each of the two forward ranges (up to 16 rows,
 * from 17 on): splitting a batch differently, over ranks or micro-batches, changes only the order of the dW and
 * db sums there (an AdamW run over 2 ranks drifted 3e-3 from one process when short micro-batches took the
 * BLAS instead).
 *
 * The thresholds are measured (docs/performance.md): din and dW through sgemm are faster per step than through
 * the unpacked kernels from 5 rows up and slower at 2 to 4; the forward of 8 to 16 rows is no faster through
 * sgemm, and from 17 rows sgemm is at least as fast as a transposed unpacked forward. The bias passes are plain loops below
 * LINEAR_PAR_MIN, so a micro-batch's call never enters the OpenMP runtime for them. */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "kernels/bf16.h"
#include "kernels/bgemm.h"
#include "kernels/gemm_direct.h"
#include "ops/op.h"
#include "ops/packed_grads.h"
#include "ops/round_output.h"
#include "kernels/sgemm.h"
#include "kernels/vmath.h"

/* Below this many elements the bias loops stay serial: a plain loop over 1 MiB costs about what an OpenMP
 * region's start and barrier do. */
#define LINEAR_PAR_MIN ((size_t)1 << 18)
/* Bias-gradient columns per task: 64 floats, a cache line apart from the next task's. */
#define LINEAR_DB_BLOCK ((size_t)64)
/* The most rows (and the least output width) whose forward takes the unpacked product; dW's unpacked product
 * from MIN_DW_ROWS rows. */
#define LINEAR_DIRECT_MAX_ROWS ((size_t)16)
/* The most rows whose din and dW take the unpacked products (more go through sgemm). */
#define LINEAR_DIRECT_GRAD_MAX_ROWS ((size_t)6)
#define LINEAR_DIRECT_MIN_DW_ROWS ((size_t)4)
#define LINEAR_DIRECT_MIN_OUT ((size_t)32)
/* The forward's unpacked product: rows of y per gemm_direct_nt call (its fast case) and weight rows per
 * task (a multiple of its 4-column tiles; 64 rows of a 3136-wide weight are 800 KB, read from L2). Below
 * LINEAR_DIRECT_PAR_MIN multiply-adds it (and din's unpacked product) runs on the calling thread: a few rows
 * of a large weight stream it for little arithmetic, and two cores stream it faster than one (the cnn's
 * 3136x128 layer at one row, both products threaded: cnn micro1 0.92 of its time, mlp micro1 0.89). */
#define LINEAR_NT_ROWS ((size_t)16)
#define LINEAR_NT_COLS ((size_t)64)
#define LINEAR_DIRECT_PAR_MIN ((size_t)1 << 18)

/* ---- shape inference ------------------------------------------------------------------------------------ */

/* x must be (features) or (tokens, features) with no zero dimension. */
static snug_status linear_input_ok(const snug_shape *in, char *msg, size_t msg_len) {
    char s[96];
    if (in->rank != 1 && in->rank != 2) {
        snprintf(msg, msg_len, "expects (features) or (tokens, features), got %s: add a flatten",
                 snug_shape_format(in, s, sizeof s));
        return SNUG_E_SHAPE;
    }
    for (int i = 0; i < in->rank; i++)
        if (in->dims[i] == 0) {
            snprintf(msg, msg_len, "input %s has a zero dimension", snug_shape_format(in, s, sizeof s));
            return SNUG_E_SHAPE;
        }
    return SNUG_OK;
}

/* in with its last dimension replaced by fo; SNUG_E_SHAPE (and a message) when a BLAS dimension would not fit. */
static snug_status linear_out_shape(const snug_shape *in, size_t fo, snug_shape *out, char *msg, size_t msg_len) {
    size_t fi = in->dims[in->rank - 1], wn;
    /* The BLAS takes int dimensions; rows are split into int-sized GEMMs at run time. */
    if (fi > INT_MAX || fo > INT_MAX || !size_mul(fi, fo, &wn) || wn > SIZE_MAX / sizeof(float)) {
        snprintf(msg, msg_len, "weight (%zu, %zu) is too large: each dimension must stay below %d", fo, fi,
                 INT_MAX);
        return SNUG_E_SHAPE;
    }
    *out = *in;
    out->dims[in->rank - 1] = fo;
    return SNUG_OK;
}

static snug_status linear_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                                int *n_params, char *msg, size_t msg_len) {
    size_t fo = n->p.linear.out_features;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    snug_status st = linear_input_ok(&in[0], msg, msg_len);
    if (st != SNUG_OK) return st;
    size_t fi = in[0].dims[in[0].rank - 1];
    if (fo == 0) {
        char s[96];
        snprintf(msg, msg_len, "needs out_features >= 1, got input %s and out_features %zu",
                 snug_shape_format(&in[0], s, sizeof s), fo);
        return SNUG_E_ARG;
    }
    if ((st = linear_out_shape(&in[0], fo, out, msg, msg_len)) != SNUG_OK) return st;
    params[0] = (param_decl){.suffix = "weight", .shape = {.rank = 2, .dims = {fo, fi}}, .fan_in = fi,
                             .init = INIT_KAIMING_UNIFORM};
    params[1] = (param_decl){.suffix = "bias", .shape = {.rank = 1, .dims = {fo}}, .fan_in = fi,
                             .init = INIT_BIAS_UNIFORM};
    *n_params = n->p.linear.no_bias ? 1 : 2; /* without a bias the products start from zero (w[1] NULL) */
    return SNUG_OK;
}

static snug_status tied_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                              int *n_params, char *msg, size_t msg_len) {
    (void)params;
    const size_t vocab = n->p.embedding.vocab, dim = n->p.embedding.dim;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    const snug_status st = linear_input_ok(&in[0], msg, msg_len);
    if (st != SNUG_OK) return st;
    if (in[0].dims[in[0].rank - 1] != dim || vocab == 0) {
        char s[96];
        snprintf(msg, msg_len, "input %s does not end in %zu, the dimension of the tied weight (%zu, %zu)",
                 snug_shape_format(&in[0], s, sizeof s), dim, vocab, dim);
        return SNUG_E_SHAPE;
    }
    *n_params = 0; /* the weight is the embedding's, shared by the builder */
    return linear_out_shape(&in[0], vocab, out, msg, msg_len);
}

/* ---- kernels -------------------------------------------------------------------------------------------- */

/* GEMMs over at most INT_MAX rows at a time: the BLAS takes int dimensions. */
static size_t rows_chunk(size_t rows, size_t r0) { return rows - r0 < (size_t)INT_MAX ? rows - r0 : INT_MAX; }

/* Whether a forward of `rows` rows and `fo` outputs takes the unpacked product (see the top of the file). */
static bool use_direct(size_t rows, size_t fo) {
    return rows <= LINEAR_DIRECT_MAX_ROWS && fo >= LINEAR_DIRECT_MIN_OUT && gemm_direct_has_avx512();
}

/* Whether its din and dW do: up to fewer rows, and only where the forward does (or sgemm would not take them). */
static bool use_direct_grads(size_t rows, size_t fo, op_product product) {
    return use_direct(rows, fo) && (rows <= LINEAR_DIRECT_GRAD_MAX_ROWS || product != OP_PRODUCT_SGEMM);
}

/* y += x W^T for the weight rows (columns of y) in blocks [b0, b1) of LINEAR_NT_COLS, 16 rows of y at a time;
 * inside a parallel region gemm_direct_nt runs on the calling thread. */
static void xwt_direct_blocks(float *y,       // (rows, fo)
                              const float *x, // (rows, fi)
                              const float *w, // (fo, fi)
                              size_t rows, size_t fi, size_t fo, size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; b++) {
        const size_t j0 = b * LINEAR_NT_COLS, nc = fo - j0 < LINEAR_NT_COLS ? fo - j0 : LINEAR_NT_COLS;
        for (size_t r0 = 0; r0 < rows; r0 += LINEAR_NT_ROWS)
            gemm_direct_nt(rows - r0 < LINEAR_NT_ROWS ? rows - r0 : LINEAR_NT_ROWS, nc, fi, x + r0 * fi, fi,
                           w + j0 * fi, fi, y + r0 * fo + j0, fo);
    }
}

/* y += x W^T without packing: threads own blocks of weight rows. */
static void xwt_direct(float *y, const float *x, const float *w, size_t rows, size_t fi, size_t fo) {
    const size_t blocks = (fo + LINEAR_NT_COLS - 1) / LINEAR_NT_COLS;
    if (blocks < 2 || fi * fo < LINEAR_DIRECT_PAR_MIN / rows || !par_pays_macs(rows * fi * fo)) {
        xwt_direct_blocks(y, x, w, rows, fi, fo, 0, blocks);
        return;
    }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        xwt_direct_blocks(y, x, w, rows, fi, fo, blocks * t / T, blocks * (t + 1) / T);
    }
}

/* The operands of the three products for sgemm: x and dy row-major, W read as W^T for the forward, dy as dy^T
 * for dW. */
static sgemm_mat rows_of(const float *p, size_t ld) { return (sgemm_mat){.p = p, .rs = ld, .cs = 1}; }
static sgemm_mat transposed(const float *p, size_t ld) { return (sgemm_mat){.p = p, .rs = 1, .cs = ld}; }

/* y = beta y + x W^T (beta 0 or 1). */
static void xwt(float *y,       // (rows, fo)
                const float *x, // (rows, fi)
                const float *w, // (fo, fi)
                size_t rows, size_t fi, size_t fo, float beta) {
    if (use_direct(rows, fo)) {
        if (beta == 0.0f) memset(y, 0, rows * fo * sizeof *y);
        xwt_direct(y, x, w, rows, fi, fo);
        return;
    }
    for (size_t r0 = 0; r0 < rows; r0 += rows_chunk(rows, r0))
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows_chunk(rows, r0), (int)fo, (int)fi, 1.0f,
                    x + r0 * fi, (int)fi, w, (int)fi, beta, y + r0 * fo, (int)fo);
}

/* din (rows, fi) += dy (rows, fo) W (fo, fi) over a few rows (= where fresh); from LINEAR_DIRECT_PAR_MIN
 * multiply-adds the threads take column ranges of din, each element's chain as on one thread. */
static void din_direct(float *din, const float *dy, const float *w, size_t rows, size_t fi, size_t fo, bool fresh) {
    if (rows * fi * fo < LINEAR_DIRECT_PAR_MIN || fi < 64 || !par_pays_macs(rows * fi * fo)) {
        gemm_direct(rows, fi, fo, dy, fo, 1, w, fi, din, fi, NULL, !fresh);
        return;
    }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads(), vecs = (fi + 15) / 16;
        const size_t j0 = vecs * t / T * 16, j1 = t + 1 == T ? fi : vecs * (t + 1) / T * 16;
        if (j1 > j0) gemm_direct(rows, j1 - j0, fo, dy, fo, 1, w + j0, fi, din + j0, fi, NULL, !fresh);
    }
}

/* dW += dy^T x (dW = dy^T x where fresh) through sgemm, the same chain over the rows as gemm_direct's below: a
 * batch split into micro-batches of any sizes sums every element of dW in the same order. */
static void dw_sgemm(float *dw, const float *dy, const float *x, size_t rows, size_t fi, size_t fo, float *work,
                     int threads, bool fresh) {
    sgemm(fo, fi, rows, transposed(dy, fo), rows_of(x, fi), dw, fi, NULL, !fresh, work, threads);
}

/* dW += dy^T x through the BLAS in one call (dW = dy^T x where fresh: zeroed first, the BLAS's bits then those
 * of adding into zeros). */
static void dw_blas(float *dw, const float *dy, const float *x, size_t rows, size_t fi, size_t fo, bool fresh) {
    if (fresh) memset(dw, 0, fo * fi * sizeof *dw);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)fo, (int)fi, (int)rows, 1.0f, dy, (int)fo, x, (int)fi,
                1.0f, dw, (int)fi);
}

/* din += dy W (din = dy W where din_fresh: its memory is stale) and dW += dy^T x (dW = dy^T x where dw_fresh);
 * either may be NULL. work: linear_workspace_bytes for the plan's product (sgemm's or bgemm's packing). Every
 * product starts each element's chain from zero instead of from a zeroed din or dW, the same bits; the BLAS's
 * dW is zeroed first instead. */
static void xwt_backward(float *din,      // (rows, fi) or NULL
                         float *dw,       // (fo, fi) or NULL
                         const float *dy, // (rows, fo)
                         const float *x,  // (rows, fi)
                         const float *w,  // (fo, fi)
                         const bgemm_panels_of *wp, // W packed as din's B, or NULL: bgemm rounds W itself
                         size_t rows, size_t fi, size_t fo, bool din_fresh, bool dw_fresh, op_product product,
                         float *work, int threads) {
    const bool own = product == OP_PRODUCT_SGEMM && work;
    if (product == OP_PRODUCT_BGEMM && work) { /* dy rounded to bfloat16 as bgemm packs it, as x and W are */
        if (din && wp) bgemm_panels(rows, fi, fo, rows_of(dy, fo), *wp, din, fi, !din_fresh, work, threads);
        else if (din)
            bgemm(rows, fi, fo, rows_of(dy, fo), rows_of(w, fi), din, fi, NULL, !din_fresh, work, threads);
        if (dw) bgemm(fo, fi, rows, transposed(dy, fo), rows_of(x, fi), dw, fi, NULL, !dw_fresh, work, threads);
        return;
    }
    if (use_direct_grads(rows, fo, product)) {
        /* din (rows, fi) += dy (rows, fo) W (fo, fi); dW (fo, fi) += dy^T (fo, rows) x (rows, fi), dy^T read
         * through its strides */
        if (din) din_direct(din, dy, w, rows, fi, fo, din_fresh);
        if (dw && rows >= LINEAR_DIRECT_MIN_DW_ROWS)
            gemm_direct(fo, fi, rows, dy, 1, fo, x, fi, dw, fi, NULL, !dw_fresh);
        else if (dw && own) dw_sgemm(dw, dy, x, rows, fi, fo, work, threads, dw_fresh);
        else if (dw) dw_blas(dw, dy, x, rows, fi, fo, dw_fresh);
        return;
    }
    if (own) {
        if (din) sgemm(rows, fi, fo, rows_of(dy, fo), rows_of(w, fi), din, fi, NULL, !din_fresh, work, threads);
        if (dw) dw_sgemm(dw, dy, x, rows, fi, fo, work, threads, dw_fresh);
        return;
    }
    if (dw && dw_fresh) memset(dw, 0, fo * fi * sizeof *dw);
    for (size_t r0 = 0; r0 < rows; r0 += rows_chunk(rows, r0)) {
        const int nr = (int)rows_chunk(rows, r0);
        if (din)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, (int)fi, (int)fo, 1.0f, dy + r0 * fo,
                        (int)fo, w, (int)fi, din_fresh ? 0.0f : 1.0f, din + r0 * fi, (int)fi);
        if (dw)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)fo, (int)fi, nr, 1.0f, dy + r0 * fo, (int)fo,
                        x + r0 * fi, (int)fi, 1.0f, dw, (int)fi);
    }
}

/* Rows [lo, hi) of y = b (NULL: 0). */
static void seed_rows(float *y,       // (rows, fo)
                      const float *b, // (fo) or NULL
                      size_t fo, size_t lo, size_t hi) {
    if (!b) memset(y + lo * fo, 0, (hi - lo) * fo * sizeof *y);
    else
        for (size_t i = lo; i < hi; i++) memcpy(y + i * fo, b, fo * sizeof *y);
}

/* Every row of y = b. */
static void seed_bias(float *y, const float *b, size_t rows, size_t fo) {
    if (rows < 2 || rows * fo < LINEAR_PAR_MIN || !par_pays_floats(rows * fo)) {
        seed_rows(y, b, fo, 0, rows);
        return;
    }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        seed_rows(y, b, fo, rows * t / T, rows * (t + 1) / T);
    }
}

/* db[lo, hi) += the column sums of dy over those columns, rows in order. Clones per instruction set, called
 * from the parallel region (inlined into it, GCC 12 kept the baseline's 4-lane SSE); every column sums its rows
 * in the same order whatever the vector width, so the bits do not change. */
VM_KERNEL static void bias_grad_cols(float *db,       // (fo)
                                     const float *dy, // (rows, fo)
                                     size_t rows, size_t fo, size_t lo, size_t hi) {
    for (size_t i = 0; i < rows; i++) {
        const float *d = dy + i * fo;
        #pragma omp simd
        for (size_t j = lo; j < hi; j++) db[j] += d[j];
    }
}

/* db += the column sums of dy (db zeroed first where fresh: fo floats, no pass worth saving). Every element adds
 * the rows in order, whoever owns its block of columns, so the bits are the same whatever the thread count:
 * deterministic. */
static void bias_grad(float *db, const float *dy, size_t rows, size_t fo, bool fresh) {
    if (fresh) memset(db, 0, fo * sizeof *db);
    const size_t nblk = (fo + LINEAR_DB_BLOCK - 1) / LINEAR_DB_BLOCK;
    if (nblk < 2 || rows * fo < LINEAR_PAR_MIN || !par_pays_floats(2 * rows * fo)) {
        bias_grad_cols(db, dy, rows, fo, 0, fo);
        return;
    }
    #pragma omp parallel for schedule(static)
    for (size_t k = 0; k < nblk; k++) {
        const size_t lo = k * LINEAR_DB_BLOCK, hi = lo + LINEAR_DB_BLOCK < fo ? lo + LINEAR_DB_BLOCK : fo;
        bias_grad_cols(db, dy, rows, fo, lo, hi);
    }
}

/* The GEMM sizes of a call: rows = m * tokens, fi and fo the last dimensions. */
/* The widths of a node's calls, and the rows one sample brings. */
static void node_dims(const op_node *n, size_t *fi, size_t *fo, size_t *per_sample) {
    const snug_shape *in = &n->in_shape[0], *out = &n->out_shape;
    *fi = in->dims[in->rank - 1];
    *fo = out->dims[out->rank - 1];
    *per_sample = n->in_numel[0] / *fi;
}

static void call_dims(const op_call *c, size_t *rows, size_t *fi, size_t *fo) {
    size_t per_sample;
    node_dims(c->node, fi, fo, &per_sample);
    *rows = c->m * per_sample;
}

/* Whether a bf16 call's products go through bgemm (every row count: each element one chain whatever the rows,
 * so no split of a batch changes a value before it is rounded). */
static bool takes_bgemm(const op_call *c) { return c->product == OP_PRODUCT_BGEMM && c->work; }

/* ---- the weights in bf16 ------------------------------------------------------------------------------- *
 * bgemm rounds its operands to bfloat16 as it packs them. The weight is the same in every product of a window
 * (forward, din, a recompute's forward, every micro-batch), so a bf16 plan keeps it rounded once (op_call.kept,
 * counted with the parameters): a 64-byte header holding the weights version it was rounded under, then the
 * (fo, fi) bf16 values. The optimizer's update writes them as it writes the weights and marks them current
 * (op_desc.kept_bf16_weight, src/train/kept_copies.c); after any other change (a load, the caller's writes, an
 * evaluation's new version) the first call rounds them again. bgemm_round_weights rounds as bgemm's packing does, so the products have the bits of the
 * per-call rounding. Without the block (a budget with no room for it) every product rounds W itself.
 * After the values the block holds W^T packed as the forward's B, then W packed as the input gradient's B
 * (bgemm_pack_panels16 from the bf16 values, each under its own version: the header's second and third words):
 * packed by the first product of a window that reads them instead of in every product (a transformer's layers
 * run a product per sample), the bits of packing them per call. */
#define LINEAR_W16_HEADER ((size_t)64)

/* The bf16 values' bytes, rounded up to the panels' 64-byte alignment. */
static bool w16_bytes(size_t fi, size_t fo, size_t *bytes) {
    return size_mul(fi, fo, bytes) && size_mul(*bytes, sizeof(uint16_t), bytes) && size_align(*bytes, 64, bytes);
}

/* The bytes of W^T's panels (the forward's), then W's (the input gradient's), each a multiple of 64. */
static bool panels_bytes(size_t fi, size_t fo, size_t *forward, size_t *din) {
    return size_mul(bgemm_panels_words(fi, fo), sizeof(uint32_t), forward) && size_align(*forward, 64, forward) &&
           size_mul(bgemm_panels_words(fo, fi), sizeof(uint32_t), din) && size_align(*din, 64, din);
}

static size_t linear_kept_bytes(const op_node *n, size_t m, op_product product) {
    (void)m;
    size_t fi, fo, per_sample, bytes, forward, din;
    node_dims(n, &fi, &fo, &per_sample);
    if (product != OP_PRODUCT_BGEMM) return 0;
    return w16_bytes(fi, fo, &bytes) && panels_bytes(fi, fo, &forward, &din) && size_add(bytes, forward, &bytes) &&
                   size_add(bytes, din, &bytes) && size_add(bytes, LINEAR_W16_HEADER, &bytes)
               ? bytes
               : SIZE_MAX;
}

/* w16 = W rounded as bgemm rounds it (n elements), over the threads where that pays: the products after it
 * wait for it. Each element is rounded alone, so the split never changes a bit; each thread takes a contiguous
 * part on cache-line (16-float) boundaries, read in order (W is fresh from the optimizer's streaming stores). */
static void round_weights(uint16_t *w16, const float *w, size_t n) {
    if (n < LINEAR_PAR_MIN || !par_pays_floats(n + n / 2)) {
        bgemm_round_weights(w16, w, n);
        return;
    }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads(), lines = (n + 15) / 16;
        const size_t lo = lines * t / T * 16, hi = t + 1 == T ? n : lines * (t + 1) / T * 16;
        if (hi > lo) bgemm_round_weights(w16 + lo, w + lo, hi - lo);
    }
}

/* op_desc.kept_bf16_weight: the header's first word, then the values. */
static uint16_t *linear_kept_bf16_weight(void *kept, uint64_t **version) {
    *version = kept;
    return (uint16_t *)(void *)((char *)kept + LINEAR_W16_HEADER);
}

/* The weight in bf16, rounded now where the kept copy is stale (the optimizer's update writes it current);
 * NULL where the plan keeps none. */
static const uint16_t *weights_bf16(const op_call *c, size_t fi, size_t fo) {
    if (!c->kept) return NULL;
    uint64_t *version;
    uint16_t *w16 = linear_kept_bf16_weight(c->kept, &version);
    if (*version != c->weights_version) {
        round_weights(w16, c->w[0], fi * fo);
        *version = c->weights_version;
    }
    return w16;
}

/* The weight packed as a product's B, packed now where the kept panels are stale: W^T (the forward's: K fi,
 * N fo) or W (the input gradient's: K fo, N fi); false where the plan keeps no bf16 weight. The packing's stage
 * is the call's workspace (the products have not begun). */
static bool kept_panels(const op_call *c, size_t fi, size_t fo, bool forward, bgemm_panels_of *b) {
    const uint16_t *w16 = weights_bf16(c, fi, fo);
    if (!w16) return false;
    size_t at, fwd, din;
    w16_bytes(fi, fo, &at); /* checked by linear_kept_bytes */
    panels_bytes(fi, fo, &fwd, &din);
    uint64_t *version = (uint64_t *)c->kept + (forward ? 1 : 2);
    uint32_t *panels = (uint32_t *)(void *)((char *)c->kept + LINEAR_W16_HEADER + at + (forward ? 0 : fwd));
    const size_t K = forward ? fi : fo, N = forward ? fo : fi;
    if (*version != c->weights_version) {
        const bgemm_mat16 w = {.p = w16, .rs = forward ? 1 : fi, .cs = forward ? fi : 1};
        bgemm_pack_panels16(panels, K, N, w, c->work);
        *version = c->weights_version;
    }
    *b = (bgemm_panels_of){.p = panels, .K = K, .N = N};
    return true;
}

static bool weights_panels(const op_call *c, size_t fi, size_t fo, bgemm_panels_of *b) {
    return kept_panels(c, fi, fo, true, b);
}

/* y = b + x W^T through bgemm (b may be NULL), W from its kept panels where the plan keeps a bf16 copy; the
 * output rounded (and packed into packed.copy) by the thread that computed each block, while in its cache, where
 * the call rounds it (packed.round), instead of a pass over the whole output after the product. */
static void forward_bgemm_output(const op_call *c, const float *b, size_t rows, size_t fi, size_t fo) {
    bgemm_panels_of panels;
    const bool round = c->packed.round;
    if (weights_panels(c, fi, fo, &panels))
        bgemm_panels_out(rows, fo, fi, rows_of(c->in[0], fi), (bgemm_mat16){0}, panels, c->out, fo, b, round,
                         c->packed.copy, c->work, c->threads);
    else if (round)
        bgemm_rounded(rows, fo, fi, rows_of(c->in[0], fi), transposed(c->w[0], fi), (bgemm_mat16){0}, c->out, fo, b,
                      c->packed.copy, c->work, c->threads);
    else
        bgemm(rows, fo, fi, rows_of(c->in[0], fi), transposed(c->w[0], fi), c->out, fo, b, false, c->work,
              c->threads);
}

/* The bf16 weight din's product reads: only where it goes through bgemm and there is a din. */
static const bgemm_panels_of *din_weights(const op_call *c, size_t fi, size_t fo, bgemm_panels_of *b) {
    return takes_bgemm(c) && c->din[0] && kept_panels(c, fi, fo, false, b) ? b : NULL;
}

/* Whether a forward of `rows` rows goes through sgemm: wherever the unpacked paths do not take it. */
static bool forward_sgemm(const op_call *c, size_t rows, size_t fo) {
    return !use_direct(rows, fo) && c->product == OP_PRODUCT_SGEMM && c->work;
}

/* y = b + x W^T (b may be NULL), the bias the start of every element's chain; in a bf16 forward rounded block
 * by block as sgemm finishes them (OP_ROUNDS_OUTPUT). */
static void forward_own(const op_call *c, const float *b, size_t rows, size_t fi, size_t fo) {
    if (c->packed.round)
        sgemm_rounded(rows, fo, fi, rows_of(c->in[0], fi), transposed(c->w[0], fi), c->out, fo, b,
                      c->packed.copy, c->work, c->threads);
    else
        sgemm(rows, fo, fi, rows_of(c->in[0], fi), transposed(c->w[0], fi), c->out, fo, b, false, c->work,
              c->threads);
}

/* The rows of the BLAS's product in one call: all of them, except where the output is rounded to bfloat16
 * (op_call.bf16) and a sample has rows enough for a product of its own (a sequence's tokens): then one sample
 * per call. The BLAS's bits for a row depend on the call's size, which float rounding hides but rounding to
 * bfloat16 would turn into a changed value wherever a split of the batch changes the calls; per sample, the
 * calls are the same whatever the split. */
static size_t blas_call_rows(const op_call *c, size_t rows) {
    size_t fi, fo, per;
    node_dims(c->node, &fi, &fo, &per);
    return c->bf16 && per > LINEAR_DIRECT_MAX_ROWS ? per : rows;
}

/* The BLAS's products of a forward, `step` rows a call, each call's rows rounded after it where there are
 * several calls (a sample's rows still in cache), else the whole output in one pass. */
static void forward_blas(const op_call *c, size_t rows, size_t fi, size_t fo, float beta) {
    const size_t step = blas_call_rows(c, rows);
    for (size_t r0 = 0; r0 < rows; r0 += step) {
        xwt(c->out + r0 * fo, c->in[0] + r0 * fi, c->w[0], step, fi, fo, beta);
        if (step < rows) op_round_output(c, r0 * fo, step * fo);
    }
    if (step == rows) op_round_output_whole(c, rows * fo);
}

static void linear_forward_rows(const op_call *c, size_t rows, size_t fi, size_t fo) {
    if (takes_bgemm(c)) {
        forward_bgemm_output(c, c->w[1], rows, fi, fo);
        return;
    }
    if (forward_sgemm(c, rows, fo)) {
        forward_own(c, c->w[1], rows, fi, fo);
        return;
    }
    /* Seed every row with the bias, then one beta = 1 GEMM adds x W^T. */
    seed_bias(c->out, c->w[1], rows, fo);
    forward_blas(c, rows, fi, fo, 1.0f);
}

static float *linear_stage(const op_call *c);
static size_t stage_part(size_t per_sample, size_t f);

/* Sample n of a staged forward through bgemm whose input is packed, where the plan keeps the weight in bf16: the
 * packed input read as it lies (bgemm_a16) instead of widened into the stage, the bits of the product over the
 * widened floats. Its output as linear_forward_staged places it (y: the stage). false where it does not apply. */
static bool forward_packed_a16(const op_call *c, size_t n, size_t per, size_t fi, size_t fo, float *y) {
    bgemm_panels_of panels;
    if (!takes_bgemm(c) || !c->packed.in[0] || !weights_panels(c, fi, fo, &panels)) return false;
    const bool round = c->packed.out || c->packed.round;
    uint16_t *packed = c->packed.out ? c->packed.out + n * per * fo : c->packed.copy ? c->packed.copy + n * per * fo
                                                                                     : NULL;
    bgemm_panels_out(per, fo, fi, (sgemm_mat){0}, (bgemm_mat16){.p = c->packed.in[0] + n * per * fi, .rs = fi, .cs = 1},
                     panels, c->packed.out ? y : c->out + n * per * fo, fo, c->w[1], round, packed, c->work,
                     c->threads);
    return true;
}

/* A bf16 forward reading its input only packed (op_call.packed.in) or writing its output only packed
 * (packed.out), where forward_sgemm_a16 does not take it: a sample at a time, its input unpacked into the
 * stage, its output made in the stage and rounded into the packed output as the product finishes its blocks. The
 * plan takes this path only on snug's products with at least LINEAR_REGEN_MIN_ROWS rows a sample (the stage's
 * condition), where a row's output does not depend on how many rows share its call: the bits of one call over
 * all rows. */
static void linear_forward_staged(const op_call *c, size_t rows, size_t fi, size_t fo) {
    const size_t per = rows / c->m;
    float *x = linear_stage(c), *y = (float *)(void *)((char *)x + stage_part(per, fi));
    for (size_t n = 0; n < c->m; n++) {
        op_call s = *c;
        s.m = 1;
        if (forward_packed_a16(c, n, per, fi, fo, y)) continue;
        s.in[0] = c->packed.in[0] ? x : c->in[0] + n * per * fi;
        if (c->packed.in[0]) bf16_unpack(x, c->packed.in[0] + n * per * fi, per * fi);
        s.out = c->packed.out ? y : c->out + n * per * fo;
        if (c->packed.out) s.packed.round = true, s.packed.copy = c->packed.out + n * per * fo;
        else if (c->packed.copy) s.packed.copy = c->packed.copy + n * per * fo;
        linear_forward_rows(&s, per, fi, fo);
    }
}

/* A bf16 forward through sgemm whose input is kept only packed and whose output is not (a transformer's second
 * MLP layer, after a GELU that writes only its packed output): one product over all rows that widens the packed
 * input as it packs its blocks (sgemm_a16), the bits of the staged samples' products (sgemm's elements do not
 * depend on the rows of a call), without the samples' unpacking into the stage and the weight packed per
 * sample. false where it does not apply. */
static bool forward_sgemm_a16(const op_call *c, size_t rows, size_t fi, size_t fo) {
    if (!c->packed.in[0] || c->packed.out || !forward_sgemm(c, rows, fo)) return false;
    sgemm_a16(rows, fo, fi, c->packed.in[0], fi, transposed(c->w[0], fi), c->out, fo, c->w[1], c->packed.round,
              c->packed.copy, c->work, c->threads);
    return true;
}

static void linear_forward(const op_call *c) {
    size_t rows, fi, fo;
    call_dims(c, &rows, &fi, &fo);
    if (rows == 0 || forward_sgemm_a16(c, rows, fi, fo)) return;
    if (c->packed.in[0] || c->packed.out) linear_forward_staged(c, rows, fi, fo);
    else linear_forward_rows(c, rows, fi, fo);
}

/* ---- pending weight-gradient rows ----------------------------------------------------------------------- *
 * A call of few rows updates dW by a thin product: it reads and writes all of dW (1.6 MB for the cnn's
 * 3136->128 layer) for a few multiply-adds per element, and accumulation pays that once per micro-batch. So a
 * layer that sees few rows per call keeps them (x and dy) and applies dW += dy^T x once per block of 16 to 64
 * rows and at the end of the window. Every element of dW stays one chain of multiply-adds over the rows in
 * sample order from its value, whether the rows come one call at a time or sixty-four at once: the same bits as
 * the immediate updates (and as the full batch's product). A call defers where it brings at most 16 rows and
 * dW is at least 4 times the rows it copies: each call then writes rows (fi + fo) floats into the block, read
 * once by the product, instead of reading and writing fi fo. The block holds 16 calls of one row, 32 of two,
 * 48 of three, 64 rows from four on (defer_capacity): a model of many layers at micro-batch 1 keeps 16 rows
 * each. The cnn's fc1 at micro-batches of 16 (4 per step) defers too: its backward with the flush takes about
 * a third less time than updating dW per call. The block is counted as gradients, and a budget with no room
 * for it plans without (then every call updates dW at once). */

/* The pending block: a header (the rows held, then the capacity, 0 until the first call sets it), then x's
 * rows (capacity, fi), then dy's (capacity, fo). */
#define LINEAR_DEFER_MAX_CALL_ROWS ((size_t)16)
#define LINEAR_PENDING_HEADER ((size_t)64)

static size_t *pending_rows(const op_call *c) { return (size_t *)c->pending; }
static size_t *pending_capacity(const op_call *c) { return (size_t *)c->pending + 1; }
static float *pending_x(const op_call *c) { return (float *)(void *)((char *)c->pending + LINEAR_PENDING_HEADER); }
static float *pending_dy(const op_call *c, size_t fi) { return pending_x(c) + *pending_capacity(c) * fi; }

/* Whether a call of `rows` rows defers its dW (above): through sgemm only (bgemm's dW rounds dy; the pending
 * rows' product would not). Monotone in rows: where a plan's m defers, every shorter call of it does too. */
static bool defers(size_t rows, size_t fi, size_t fo, op_product product) {
    return product == OP_PRODUCT_SGEMM && rows <= LINEAR_DEFER_MAX_CALL_ROWS && fi * fo / 4 >= rows * (fi + fo);
}

/* The rows a block holds for calls of `rows` rows: 16 per row, at most 64; monotone, so a plan's block (sized
 * for its m) holds what any shorter call asks. */
static size_t defer_capacity(size_t rows) { return rows >= 4 ? 64 : 16 * (rows ? rows : 1); }

static void flush_rows(const op_call *c, size_t fi, size_t fo) {
    size_t *n = pending_rows(c);
    if (*n) dw_sgemm(c->dw[0], pending_dy(c, fi), pending_x(c), *n, fi, fo, c->work, c->threads, false);
    *n = 0;
}

/* The first call of a run sets the capacity: the longest a window brings (the rest of its calls and of later
 * windows are as long or shorter), at most what the plan sized the block for. */
static void defer_rows(const op_call *c, size_t rows, size_t fi, size_t fo) {
    size_t *n = pending_rows(c);
    if (*pending_capacity(c) == 0) *pending_capacity(c) = defer_capacity(rows);
    if (*n + rows > *pending_capacity(c)) flush_rows(c, fi, fo);
    if (c->in_packed) bf16_unpack(pending_x(c) + *n * fi, c->in_packed, rows * fi); /* exact */
    else memcpy(pending_x(c) + *n * fi, c->in[0], rows * fi * sizeof(float));
    memcpy(pending_dy(c, fi) + *n * fo, c->dout, rows * fo * sizeof(float));
    *n += rows;
}

static void linear_flush(const op_call *c) {
    size_t fi, fo, per_sample;
    node_dims(c->node, &fi, &fo, &per_sample);
    if (c->dw[0]) flush_rows(c, fi, fo);
}

/* Where every call of a plan at m defers: defer_capacity (fi + fo) floats (835 KB for the cnn's 3136->128
 * layer at 16 rows), counted as gradients. */
static size_t linear_pending_bytes(const op_node *n, size_t m, op_product product) {
    size_t fi, fo, per_sample, rows, floats, bytes;
    node_dims(n, &fi, &fo, &per_sample);
    if (!size_mul(m, per_sample, &rows)) return SIZE_MAX;
    if (!defers(rows, fi, fo, product)) return 0;
    if (!size_add(fi, fo, &floats) || !size_mul(floats, defer_capacity(rows) * sizeof(float), &bytes) ||
        !size_add(bytes, LINEAR_PENDING_HEADER, &bytes))
        return SIZE_MAX;
    return bytes;
}

/* ---- regenerated inputs ----------------------------------------------------------------------------------
 * Where the plan regenerates this layer's input (op_call.regen: a LayerNorm's or GELU's output nothing else
 * reads), backward has no in[0]: dW += dy^T x goes sample by sample, each sample's rows regenerated into a stage
 * after the workspace sgemm uses. sgemm carries every element's chain through C in row order, so the per-sample
 * products give the bits of one product over all rows. Only where sgemm takes dW at every micro-batch (samples
 * of LINEAR_REGEN_MIN_ROWS rows and more: a transformer's tokens), so the bits never depend on the path. */
#define LINEAR_REGEN_MIN_ROWS ((size_t)17)
/* Below this many elements a sample is regenerated on the calling thread. */
#define LINEAR_REGEN_PAR_MIN ((size_t)1 << 16)

/* The stage: one sample's input, then (a forward writing only packed) one sample's output. */
static size_t stage_part(size_t per_sample, size_t f) {
    size_t b;
    return size_mul(per_sample, f, &b) && size_mul(b, sizeof(float), &b) && size_align(b ? b : 1, 64, &b) ? b
                                                                                                   : SIZE_MAX;
}

static size_t linear_stage_bytes(size_t per_sample, size_t fi, size_t fo) {
    const size_t x = stage_part(per_sample, fi), y = stage_part(per_sample, fo);
    size_t b;
    return x != SIZE_MAX && y != SIZE_MAX && size_add(x, y, &b) && size_add(b, 64, &b) ? b : SIZE_MAX;
}

static size_t linear_workspace_bytes(const op_node *n, size_t m, int threads, op_product product);

/* The stage: one sample's input, 64-byte aligned after the workspace this call's products use (the plan placed
 * the stage after those). */
static float *linear_stage(const op_call *c) {
    const uintptr_t at = (uintptr_t)c->work + linear_workspace_bytes(c->node, c->m, c->threads, c->product);
    return (float *)(void *)((at + 63) / 64 * 64);
}

/* dW += dy^T x over sample n's per rows (dW = where fresh), x regenerated into the stage; dy the sample's
 * (per, fo). */
static void dw_regenerated_sample(const op_call *c, size_t n, const float *dy, size_t per, size_t fi, size_t fo,
                                  bool fresh) {
    const size_t n_el = per * fi;
    float *stage = linear_stage(c);
    const op_call *p = c->regen;
    #pragma omp parallel if (n_el >= LINEAR_REGEN_PAR_MIN && par_pays_floats(2 * n_el))
    p->node->op->regen(p, n, stage, (size_t)omp_get_thread_num(), (size_t)omp_get_num_threads());
    if (takes_bgemm(c)) /* as the unregenerated product: dy rounded as bgemm packs it */
        bgemm(fo, fi, per, transposed(dy, fo), rows_of(stage, fi), c->dw[0], fi, NULL, !fresh, c->work, c->threads);
    else dw_sgemm(c->dw[0], dy, stage, per, fi, fo, c->work, c->threads, fresh);
}

static void dw_regenerated(const op_call *c, size_t rows, size_t fi, size_t fo) {
    const size_t per = rows / c->m;
    for (size_t n = 0; n < c->m; n++)
        dw_regenerated_sample(c, n, c->dout + n * per * fo, per, fi, fo, n == 0 && (c->dw_fresh & 1u));
}

/* ---- an input kept only packed ----------------------------------------------------------------------------
 * In a bf16 plan on snug's products, backward reads x from its packed copy (op_call.in_packed, OP_READS_PACKED)
 * where the plan keeps no float32 instance of it (a ReLU's output before the next layer): dW += dy^T x through
 * sgemm_b16 or bgemm_b16, which widen (or take as they are) the bfloat16 values as they pack B. The values are
 * exactly the float32 instance's, and sgemm's chains are gemm_direct's, so the bits are the unpacked call's
 * whichever path its rows took (din's product never reads x; pending rows are widened as they are copied). No
 * stage, no pass over x. */
static bool linear_reads_packed(const op_node *n, op_product product) {
    (void)n;
    return product != OP_PRODUCT_BLAS;
}

static void dw_packed(const op_call *c, size_t rows, size_t fi, size_t fo) {
    const bool fresh = c->dw_fresh & 1u;
    if (takes_bgemm(c)) /* as the unpacked product and the regenerated input's */
        bgemm_b16(fo, fi, rows, transposed(c->dout, fo), (bgemm_mat16){.p = c->in_packed, .rs = fi, .cs = 1},
                  c->dw[0], fi, NULL, !fresh, c->work, c->threads);
    else sgemm_b16(fo, fi, rows, transposed(c->dout, fo), c->in_packed, fi, c->dw[0], fi, !fresh, c->work, c->threads);
}

static void linear_backward_float(const op_call *c, size_t rows, size_t fi, size_t fo) {
    /* bgemm's dW rounds dy; the pending rows' product would not, so a bf16 call through it defers nothing */
    const bool pend = c->pending && c->dw[0] && defers(rows, fi, fo, c->product);
    if (pend && (c->dw_fresh & 1u)) memset(c->dw[0], 0, fi * fo * sizeof(float)); /* the rows add later */
    if (pend) defer_rows(c, rows, fi, fo);
    const bool regen = c->regen && c->dw[0] && !pend, packed = c->in_packed && c->dw[0] && !pend;
    bgemm_panels_of wp;
    xwt_backward(c->din[0], pend || regen || packed ? NULL : c->dw[0], c->dout, c->in[0], c->w[0],
                 din_weights(c, fi, fo, &wp), rows, fi, fo, c->din_fresh & 1u, c->dw_fresh & 1u, c->product, c->work,
                 c->threads);
    if (regen) dw_regenerated(c, rows, fi, fo);
    if (packed) dw_packed(c, rows, fi, fo);
    if (c->dw[1]) bias_grad(c->dw[1], c->dout, rows, fo, c->dw_fresh & 2u);
}

/* ---- packed activation gradients -------------------------------------------------------------------------
 * Where the plan stores dy or din in bfloat16 (op_call.grads), backward goes sample by sample: dy's sample
 * unpacked into a float32 stage, din's computed into a stage (its earlier share unpacked first where it is not
 * fresh) and rounded once as it is stored, each sample a call of float32 backward over its rows. Every element
 * of din is one chain over fo whatever the rows, and dW, db carry their chains through memory in row order, so
 * the samples give the bits of one call over all rows (on snug's products: the plan takes the BLAS only
 * without bgemm, where the rows of a call change its bits, and sgemm's and gemm_direct's chains are the same). */

/* The stages: one sample of dy, then one of din; where the plan stages the input (a regenerated one), its stage
 * (x's part then y's, as large) holds them, din's values stored before the input is regenerated over them. */
static float *grad_stage_dy(const op_call *c, size_t per, size_t fi) {
    if (c->regen) return (float *)(void *)((char *)linear_stage(c) + stage_part(per, fi));
    return c->grads.stage;
}

static float *grad_stage_dx(const op_call *c, size_t per, size_t fo) {
    if (c->regen) return linear_stage(c);
    return (float *)(void *)((char *)c->grads.stage + grad_stage_bytes_of(per * fo));
}

/* The passes that ready sample n's stages (dy unpacked, din's earlier share unpacked: stage_in) or store din
 * (rounded into the packed gradient: !stage_in), over the threads where that pays: the products between them run
 * on all threads, and a serial pass of a sample's dy (a transformer layer's 256 x 1024) would leave one idle.
 * Each element alone, on cache-line (16-float) boundaries: the split changes no bit. */
static void sample_passes(const op_call *c, size_t n, size_t per, size_t fi, size_t fo, bool wants_din,
                          bool stage_in) {
    const size_t dy_n = c->grads.dout && stage_in ? per * fo : 0;
    const size_t dx_n = wants_din && c->grads.din[0] && (!stage_in || !(c->din_fresh & 1u)) ? per * fi : 0;
    if (dy_n + dx_n == 0) return;
    #pragma omp parallel if (dy_n + dx_n >= LINEAR_PAR_MIN && par_pays_floats(3 * (dy_n + dx_n)))
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        const size_t dy_l = (dy_n + 15) / 16, dx_l = (dx_n + 15) / 16;
        const size_t dy_lo = dy_l * t / T * 16, dy_hi = t + 1 == T ? dy_n : dy_l * (t + 1) / T * 16;
        const size_t dx_lo = dx_l * t / T * 16, dx_hi = t + 1 == T ? dx_n : dx_l * (t + 1) / T * 16;
        if (dy_hi > dy_lo) grad_dy(c, per * fo, n, grad_stage_dy(c, per, fi), dy_lo, dy_hi);
        if (dx_hi > dx_lo && stage_in) grad_dx(c, 0, per * fi, n, grad_stage_dx(c, per, fo), false, dx_lo, dx_hi);
        if (dx_hi > dx_lo && !stage_in) grad_dx_store(c, 0, per * fi, n, grad_stage_dx(c, per, fo), dx_lo, dx_hi);
    }
}

static void linear_backward_packed(const op_call *c, size_t rows, size_t fi, size_t fo) {
    const size_t per = rows / c->m;
    const bool wants_din = grad_din_wanted(c, 0);
    for (size_t n = 0; n < c->m; n++) {
        op_call s = *c;
        s.m = 1;
        if (n > 0) s.dw_fresh = 0; /* the first sample writes dW and db whole, the rest add */
        sample_passes(c, n, per, fi, fo, wants_din, true);
        /* the stages now ready: these calls only name them (a range of none) */
        s.dout = grad_dy(c, per * fo, n, grad_stage_dy(c, per, fi), 0, 0);
        s.din[0] = wants_din ? grad_dx(c, 0, per * fi, n, grad_stage_dx(c, per, fo), false, 0, 0) : NULL;
        if (c->in[0]) s.in[0] = c->in[0] + n * per * fi;
        if (c->in_packed) s.in_packed = c->in_packed + n * per * fi;
        if (c->regen) s.regen = NULL, s.dw[0] = NULL; /* dW below, from sample n regenerated by the producer */
        linear_backward_float(&s, per, fi, fo);
        sample_passes(c, n, per, fi, fo, wants_din, false);
        if (c->regen && c->dw[0]) dw_regenerated_sample(c, n, s.dout, per, fi, fo, n == 0 && (c->dw_fresh & 1u));
    }
}

static void linear_backward(const op_call *c) {
    size_t rows, fi, fo;
    call_dims(c, &rows, &fi, &fo);
    if (rows == 0) return;
    if (c->grads.dout || c->grads.din[0]) linear_backward_packed(c, rows, fi, fo);
    else linear_backward_float(c, rows, fi, fo);
}

static void tied_forward(const op_call *c) {
    size_t rows, fi, fo;
    call_dims(c, &rows, &fi, &fo);
    if (rows == 0) return;
    if (takes_bgemm(c)) {
        forward_bgemm_output(c, NULL, rows, fi, fo);
        return;
    }
    if (forward_sgemm(c, rows, fo)) {
        forward_own(c, NULL, rows, fi, fo);
        return;
    }
    forward_blas(c, rows, fi, fo, 0.0f);
}

static void tied_backward(const op_call *c) {
    size_t rows, fi, fo;
    call_dims(c, &rows, &fi, &fo);
    if (rows == 0) return;
    bgemm_panels_of wp;
    xwt_backward(c->din[0], c->dw[0], c->dout, c->in[0], c->w[0], din_weights(c, fi, fo, &wp), rows, fi, fo,
                 c->din_fresh & 1u, c->dw_fresh & 1u, c->product, c->work, c->threads);
}

/* ---- costs ---------------------------------------------------------------------------------------------- */

/* 2 * rows * fi * fo = 2 * (input numel) * fo. */
static double linear_flops(const op_node *n) {
    double fo = (double)n->out_shape.dims[n->out_shape.rank - 1];
    return 2.0 * (double)n->in_numel[0] * fo;
}

static size_t linear_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads the input itself (OP_KEEPS_INPUT) */
}

/* sgemm's packing for the forward, din and dW of the most rows a micro-batch of at most m samples brings
 * (workspace is sized for the largest call, and every smaller call needs no more). */
static size_t sgemm_bytes(const op_node *n, size_t m, int threads) {
    size_t fi, fo, per_sample, rows, bytes;
    node_dims(n, &fi, &fo, &per_sample);
    if (!size_mul(m, per_sample, &rows)) return SIZE_MAX;
    /* Which products take sgemm's packed path depends on the rows only through conditions that hold from some
     * row count up (the unpacked paths serve the fewer rows), and a product's need grows with its rows: the
     * largest call's need, for the products it sends to sgemm, covers every call of the plan. Pending rows
     * are applied defer_capacity(rows) at a time. */
    size_t need[4] = {0, 0, 0, 0}, floats = 0;
    const bool packed_grads = !use_direct_grads(rows, fo, OP_PRODUCT_SGEMM);
    if (!use_direct(rows, fo)) need[0] = sgemm_workspace_floats(rows, fo, fi, threads); /* forward */
    if (packed_grads) need[1] = sgemm_workspace_floats(rows, fi, fo, threads);            /* din */
    /* dW: where the grads go through sgemm, and (an input read packed: dw_packed) also where they would not */
    if (rows > SGEMM_SMALL_K) need[2] = sgemm_workspace_floats(fo, fi, rows, threads);
    if (defers(rows, fi, fo, OP_PRODUCT_SGEMM)) need[3] = sgemm_workspace_floats(fo, fi, defer_capacity(rows), threads);
    for (int i = 0; i < 4; i++) floats = need[i] > floats ? need[i] : floats;
    return size_mul(floats, sizeof(float), &bytes) ? bytes : SIZE_MAX;
}

/* bgemm's: the largest of its three products' needs (every call of a bf16 plan that takes bgemm goes through it:
 * forward, din, dW, the regenerated inputs' dW; no pending rows). */
static size_t bgemm_bytes(const op_node *n, size_t m, int threads) {
    size_t fi, fo, per_sample, rows, bytes;
    node_dims(n, &fi, &fo, &per_sample);
    if (!size_mul(m, per_sample, &rows)) return SIZE_MAX;
    size_t floats = bgemm_workspace_floats(rows, fo, fi, threads);
    const size_t din = bgemm_workspace_floats(rows, fi, fo, threads), dw = bgemm_workspace_floats(fo, fi, rows, threads);
    floats = din > floats ? din : floats;
    floats = dw > floats ? dw : floats;
    return size_mul(floats, sizeof(float), &bytes) ? bytes : SIZE_MAX;
}

/* The workspace of the plan's product: the BLAS's packing is its own (the unpacked products need none). */
static size_t linear_workspace_bytes(const op_node *n, size_t m, int threads, op_product product) {
    return product == OP_PRODUCT_BGEMM ? bgemm_bytes(n, m, threads)
         : product == OP_PRODUCT_SGEMM ? sgemm_bytes(n, m, threads) : 0;
}

/* One sample's input (and alignment) where this layer can regenerate its input: LINEAR_REGEN_MIN_ROWS rows a
 * sample, through snug's own products (each element of dW one chain carried through C); 0 where it cannot. */
static size_t linear_regen_stage_bytes(const op_node *n, size_t m, int threads, op_product product) {
    (void)m, (void)threads;
    size_t fi, fo, per;
    node_dims(n, &fi, &fo, &per);
    return product != OP_PRODUCT_BLAS && per >= LINEAR_REGEN_MIN_ROWS ? linear_stage_bytes(per, fi, fo) : 0;
}

/* One sample's dy and one sample's din (linear_backward_packed), in float32, where the input has no stage. */
static size_t linear_grad_stage_bytes(const op_node *n, size_t m, int threads, bool input_staged) {
    (void)m, (void)threads;
    size_t fi, fo, per, bytes;
    node_dims(n, &fi, &fo, &per);
    if (input_staged) return 0; /* the input's stage holds both (grad_stage_dy) */
    const size_t dy = grad_stage_bytes_of(per * fo), dx = grad_stage_bytes_of(per * fi);
    return dy != SIZE_MAX && dx != SIZE_MAX && size_add(dy, dx, &bytes) ? bytes : SIZE_MAX;
}

static const op_product_sizes linear_sizes = {
    .workspace_bytes = linear_workspace_bytes,
    .pending_bytes = linear_pending_bytes,
    .regen_stage_bytes = linear_regen_stage_bytes,
    .kept_bytes = linear_kept_bytes,
    .reads_packed = linear_reads_packed,
};

static const op_product_sizes tied_sizes = {.workspace_bytes = linear_workspace_bytes,
                                            .kept_bytes = linear_kept_bytes};

const op_desc op_linear = {
    .kind = "linear",
    .flags = OP_KEEPS_INPUT | OP_WRITES_FRESH | OP_REGEN_INPUT | OP_ROUNDS_OUTPUT | OP_GRAD_READS_PACKED |
             OP_GRAD_WRITES_PACKED | OP_FORWARD_READS_PACKED | OP_WRITES_PACKED | OP_WRITES_DW_FRESH |
             OP_READS_PACKED,
    .infer = linear_infer,
    .forward = linear_forward,
    .backward = linear_backward,
    .flops = linear_flops,
    .saved_bytes = linear_saved_bytes,
    .by_product = &linear_sizes,
    .kept_bf16_weight = linear_kept_bf16_weight,
    .flush = linear_flush,
    .grad_stage_bytes = linear_grad_stage_bytes,
};

const op_desc op_linear_tied = {
    .kind = "linear_tied",
    .flags = OP_KEEPS_INPUT | OP_WRITES_FRESH | OP_ROUNDS_OUTPUT | OP_WRITES_DW_FRESH,
    .infer = tied_infer,
    .forward = tied_forward,
    .backward = tied_backward,
    .flops = linear_flops,
    .saved_bytes = linear_saved_bytes,
    .by_product = &tied_sizes,
    .kept_bf16_weight = linear_kept_bf16_weight,
};
