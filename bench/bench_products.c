/* What accumulation costs the matrix products: for the linear layers of the mlp (784 -> 1024 -> 1024) and the
 * cnn (3136 -> 128), each of a layer's three products (forward y = x W^T, input gradient dx = dy W, weight
 * gradient dW += dy^T x) as one call over the batch's B rows against k calls of B / k rows, through snug's own
 * product (src/kernels/sgemm.c) on every thread. "cold": a 64 MiB pass over other memory before every call, so the
 * weights come from memory as they do in a training step whose working set outgrows the caches; "warm": not.
 * A ratio above 1 is what the micro-batches pay for that product; the workload's accum4 must-show allows 1.05
 * for the whole step. (The cnn layer's forward of 16 rows takes gemm_direct_nt in the layer, not sgemm: its
 * row here is sgemm's.)
 *
 * Where the CPU has AVX512_BF16, a second table gives the rate of each product (one call of B rows, warm) in
 * float32 through sgemm and in bf16 through bgemm (src/kernels/bgemm.c), and of a square 1024 product, in
 * GFLOP/s: read against bench_fma_peak's two lines (the same threads), the bf16 column says how much of the
 * vdpbf16ps register peak the bf16 product reaches.
 *
 * usage: bench_products [repeats] [markdown-output-file] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/bgemm.h"
#include "kernels/sgemm.h"

typedef struct layer {
    const char *name;
    size_t fi, fo, batch, parts; /* a (fo, fi) weight, B rows as 1 call or as `parts` calls */
} layer;

static const layer layers[] = {
    {"mlp 784 -> 1024", 784, 1024, 256, 4},
    {"mlp 1024 -> 1024", 1024, 1024, 256, 4},
    {"cnn 3136 -> 128", 3136, 128, 64, 4},
};

enum { FORWARD, INPUT_GRAD, WEIGHT_GRAD, N_PRODUCTS };
static const char *const product_names[N_PRODUCTS] = {"forward", "input gradient", "weight gradient"};

/* Floats filled with small values, so that no product meets denormals or infinities. */
static float *floats(size_t n) {
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_products: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)(i % 13) * 0.01f - 0.06f;
    return p;
}

/* A pass over 64 MiB of other memory: the weights and gradients leave every cache level. */
static float *evict_buf;
static const size_t evict_floats = (size_t)16 << 20;
static void evict(void) {
    for (size_t i = 0; i < evict_floats; i += 16) evict_buf[i] += 1.0f;
}

typedef struct operands {
    float *w, *dw, *x, *y, *dy, *dx, *work;
} operands;

/* The two products of the same interface: float32 (sgemm) and bf16 (bgemm). */
typedef void (*gemm_fn)(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc,
                        const float *col_bias, bool accumulate, float *work, int threads);

/* One product over `rows` rows starting at row r0 of the batch, through `gemm`. */
static void product_with(gemm_fn gemm, int which, const layer *l, const operands *o, size_t r0, size_t rows) {
    const size_t fi = l->fi, fo = l->fo;
    const int T = omp_get_max_threads();
    switch (which) {
    case FORWARD:
        gemm(rows, fo, fi, (sgemm_mat){o->x + r0 * fi, fi, 1}, (sgemm_mat){o->w, 1, fi}, o->y + r0 * fo, fo, NULL,
             false, o->work, T);
        break;
    case INPUT_GRAD:
        gemm(rows, fi, fo, (sgemm_mat){o->dy + r0 * fo, fo, 1}, (sgemm_mat){o->w, fi, 1}, o->dx + r0 * fi, fi, NULL,
             false, o->work, T);
        break;
    default:
        gemm(fo, fi, rows, (sgemm_mat){o->dy + r0 * fo, 1, fo}, (sgemm_mat){o->x + r0 * fi, fi, 1}, o->dw, fi, NULL,
             true, o->work, T);
    }
}

static void product(int which, const layer *l, const operands *o, size_t r0, size_t rows) {
    product_with(sgemm, which, l, o, r0, rows);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The batch's rows in `parts` calls: seconds of repeat r into t[r]. */
static void time_parts(int which, const layer *l, const operands *o, size_t parts, int cold, double *t) {
    const size_t rows = l->batch / parts;
    *t = 0;
    for (size_t p = 0; p < parts; p++) {
        if (cold) evict();
        const double t0 = omp_get_wtime();
        product(which, l, o, p * rows, rows);
        *t += omp_get_wtime() - t0;
    }
}

/* Medians over the repeats of one call (med[0]) and of l->parts calls (med[1]), the two alternating within
 * every repeat so that a drift of the machine hits both alike. */
static void time_both(int which, const layer *l, const operands *o, int cold, int repeats, double med[2]) {
    double *t = malloc(2 * (size_t)repeats * sizeof *t);
    if (!t) exit(1);
    for (int r = 0; r < repeats; r++) {
        time_parts(which, l, o, 1, cold, &t[r]);
        time_parts(which, l, o, l->parts, cold, &t[repeats + r]);
    }
    for (int k = 0; k < 2; k++) {
        qsort(t + k * repeats, (size_t)repeats, sizeof *t, cmp_double);
        med[k] = t[k * repeats + repeats / 2];
    }
    free(t);
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The workspace of the largest of the layer's three products (one call of B rows), through either product. */
static size_t workspace_floats(const layer *l) {
    const int T = omp_get_max_threads();
    size_t most = 0;
    const size_t dims[3][3] = {{l->batch, l->fo, l->fi}, {l->batch, l->fi, l->fo}, {l->fo, l->fi, l->batch}};
    for (int i = 0; i < 3; i++) {
        most = max_size(most, sgemm_workspace_floats(dims[i][0], dims[i][1], dims[i][2], T));
        most = max_size(most, bgemm_workspace_floats(dims[i][0], dims[i][1], dims[i][2], T));
    }
    return most;
}

/* GFLOP/s of one call of the batch's rows through `gemm`, the best of `repeats` (warm). */
static double rate(gemm_fn gemm, int which, const layer *l, const operands *o, int repeats) {
    double best = 1e30;
    product_with(gemm, which, l, o, 0, l->batch); /* first touch of the workspace */
    for (int r = 0; r < repeats; r++) {
        const double t0 = omp_get_wtime();
        product_with(gemm, which, l, o, 0, l->batch);
        const double t = omp_get_wtime() - t0;
        best = t < best ? t : best;
    }
    return 2.0 * (double)l->batch * (double)l->fi * (double)l->fo / best * 1e-9;
}

static operands operands_of(const layer *l) {
    return (operands){floats(l->fo * l->fi), floats(l->fo * l->fi), floats(l->batch * l->fi),
                      floats(l->batch * l->fo), floats(l->batch * l->fo), floats(l->batch * l->fi),
                      floats(workspace_floats(l))};
}

static void free_operands(operands *o) {
    free(o->w), free(o->dw), free(o->x), free(o->y), free(o->dy), free(o->dx), free(o->work);
}

/* Both ways out: stdout and the markdown file when there is one. */
static void emit(FILE *md, const char *text) {
    fputs(text, stdout);
    if (md) fputs(text, md);
}

/* The float32 and bf16 rates of every product of the layers, and of a square product. */
static void rates_table(FILE *md, int repeats) {
    static const layer square = {"square 1024", 1024, 1024, 1024, 1};
    char line[256];
    snprintf(line, sizeof line, "\n# float32 and bf16 products\n\n%d threads; the best of %d warm calls of the "
             "batch's rows, GFLOP/s.\n\n| layer | product | B | sgemm | bgemm | bgemm / sgemm |\n"
             "|---|---|--:|--:|--:|--:|\n", omp_get_max_threads(), repeats);
    emit(md, line);
    for (size_t i = 0; i <= sizeof layers / sizeof layers[0]; i++) {
        const layer *l = i < sizeof layers / sizeof layers[0] ? &layers[i] : &square;
        operands o = operands_of(l);
        for (int which = 0; which < N_PRODUCTS; which++) {
            const double f32 = rate(sgemm, which, l, &o, repeats), b16 = rate(bgemm, which, l, &o, repeats);
            snprintf(line, sizeof line, "| %s | %s | %zu | %.1f | %.1f | %.2f |\n", l->name, product_names[which],
                     l->batch, f32, b16, b16 / f32);
            emit(md, line);
        }
        free_operands(&o);
    }
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 21;
    if (repeats < 1) {
        fprintf(stderr, "usage: bench_products [repeats >= 1] [markdown-output-file]\n");
        return 2;
    }
    if (!sgemm_enabled()) {
        printf("bench_products: snug's own product needs AVX-512 (this CPU or build has none); "
               "the linear layers use the BLAS here\n");
        return 0;
    }
    FILE *md = argc > 2 ? fopen(argv[2], "w") : NULL;
    if (argc > 2 && !md) {
        perror(argv[2]);
        return 1;
    }
    evict_buf = floats(evict_floats);
    char head[256];
    snprintf(head, sizeof head, "# What micro-batches cost the linear layers' products\n\n%d threads, snug's own "
             "product; median of %d repeats; ratio = (k calls of B / k rows) / (one call of B rows).\n\n",
             omp_get_max_threads(), repeats);
    const char *cols = "| layer | product | B | k | cold: one call (ms) | cold: k calls (ms) | cold ratio | warm: one "
                       "call (ms) | warm: k calls (ms) | warm ratio |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n";
    emit(md, head), emit(md, cols);
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        const layer *l = &layers[i];
        operands o = operands_of(l);
        for (int which = 0; which < N_PRODUCTS; which++) {
            double t[2][2];
            for (int cold = 0; cold < 2; cold++) time_both(which, l, &o, cold, repeats, t[cold]);
            char line[256];
            snprintf(line, sizeof line, "| %s | %s | %zu | %zu | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |\n", l->name,
                     product_names[which], l->batch, l->parts, t[1][0] * 1e3, t[1][1] * 1e3, t[1][1] / t[1][0],
                     t[0][0] * 1e3, t[0][1] * 1e3, t[0][1] / t[0][0]);
            emit(md, line);
        }
        free_operands(&o);
    }
    free(evict_buf);
    if (bgemm_enabled()) rates_table(md, repeats);
    if (md && fclose(md) != 0) {
        perror(argv[2]);
        return 1;
    }
    return 0;
}
