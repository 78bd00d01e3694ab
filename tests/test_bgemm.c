/* bgemm against a double-precision reference, on both of its paths: the portable micro-kernel on every CPU,
 * and the AVX512_BF16 one where the CPU has it (bgemm_force_portable switches between them; the first lines
 * of the output say which ran). Inputs are bf16 values (float32 rounded to nearest even by bit arithmetic
 * here) over a spread of magnitudes; shapes cross every block edge (K odd, K = 1, K over one 512-deep block and
 * split into even blocks with an odd last one, K over the blocks the AMX path packs A for at once, rows not a
 * multiple of the 8-row tile, M above one 128-row block and above the AMX path's 256, columns not a multiple
 * of 32, N above one 512-column block, K a multiple of 32 (a bfloat16 A then read by AMX tiles where it lies,
 * but for its last rows) over one block, over several and over two of the AMX path's super-blocks); every
 * combination of a row-major and a
 * transposed A and B, each stored with a leading dimension wider than its rows whose padding holds NaNs (a
 * read of it would show in C); the three starts (zero, C itself, a bias per column); C's own padding must stay
 * untouched. The products of bf16 values are exact in float32, so each element may differ from the reference
 * only by the float32 rounding of its K additions: |got - want| <= (K + 1) 2^-23 (|init| + sum |a_ik b_kj|).
 * Also: the same bits on 1, 2 and 3 threads; unrounded inputs rounded to nearest even when packed (ties
 * included); the documented lane of vdpbf16ps (the odd k's product added before the even k's, denormal inputs
 * read as zero, denormal results flushed), required of the portable kernel and reported for the CPU's
 * instruction, with how many elements of C the two paths give different bits for; the workspace bound, by
 * handing bgemm exactly bgemm_workspace_floats filled with NaNs and surrounded by more. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/bgemm.h"
#include "kernels/isa.h"
#include "kernels/sgemm.h"
#include "plan/plan.h"
#include "test_util.h"

/* The workspace is handed over filled with a NaN, and GUARD of them on either side must stay as they were: a
 * read of anything bgemm did not write first, or past either end, would show in C. */
#define GUARD 64
#define POISON 0x7FC0BEEFu
/* Leading dimensions exceed the rows by this much (A, B and C). */
#define PAD 3

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x (finite, normal or zero) rounded to the nearest bfloat16, ties to even. */
static float nearest_bf16(float x) {
    const uint32_t u = bits_of(x);
    return float_of((u + 0x7FFFu + (u >> 16 & 1u)) & 0xFFFF0000u);
}

/* A small deterministic generator. */
static uint32_t next(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

/* Values in [-1, 1) scaled by 2^e, e in [-6, 6] (bf16's 8 bits of precision, float32's exponents), unrounded. */
static void fill_raw(float *v, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        const float unit = (float)(next(&s) >> 8) / (float)(1u << 23) - 1.0f;
        v[i] = ldexpf(unit, (int)(next(&s) >> 28) % 13 - 6);
    }
}

static void fill_bf16(float *v, size_t n, uint32_t seed) {
    fill_raw(v, n, seed);
    for (size_t i = 0; i < n; i++) v[i] = nearest_bf16(v[i]);
}

static const size_t shapes[][3] = {{1, 1, 1},     {1, 1, 2},     {3, 5, 2},      {2, 3, 7},     {8, 32, 9},
                                   {9, 33, 16},   {17, 100, 5},  {16, 64, 512},  {33, 65, 513}, {7, 40, 1025},
                                   {130, 70, 300}, {40, 600, 100}, {300, 40, 33}, {128, 128, 40}, {20, 530, 700},
                                   {40, 33, 4500}, {70, 40, 4200}, {70, 40, 96},  {100, 64, 1088}, {40, 50, 4608}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

enum { START_ZERO, START_C, START_BIAS };

typedef struct problem {
    size_t M, N, K, ldc;
    bool at, bt; /* A, B stored transposed */
    float *a, *b, *c0, *bias;
} problem;

/* Stored rows and row length of A and B, padding included. */
static size_t a_rows(const problem *p) { return p->at ? p->K : p->M; }
static size_t a_len(const problem *p) { return (p->at ? p->M : p->K) + PAD; }
static size_t b_rows(const problem *p) { return p->bt ? p->N : p->K; }
static size_t b_len(const problem *p) { return (p->bt ? p->K : p->N) + PAD; }

/* NaN in the padding of each stored row: bgemm must never read it. */
static void poison_padding(float *v, size_t rows, size_t len) {
    for (size_t r = 0; r < rows; r++)
        for (size_t t = len - PAD; t < len; t++) v[r * len + t] = NAN;
}

static problem make(size_t M, size_t N, size_t K, bool at, bool bt) {
    problem p = {.M = M, .N = N, .K = K, .ldc = N + PAD, .at = at, .bt = bt};
    const size_t na = a_rows(&p) * a_len(&p), nb = b_rows(&p) * b_len(&p);
    p.a = malloc((na ? na : 1) * sizeof *p.a), p.b = malloc((nb ? nb : 1) * sizeof *p.b);
    p.c0 = malloc(M * p.ldc * sizeof *p.c0), p.bias = malloc(N * sizeof *p.bias);
    assert_true(p.a && p.b && p.c0 && p.bias);
    fill_bf16(p.a, na, 1), fill_bf16(p.b, nb, 2), fill_raw(p.c0, M * p.ldc, 3), fill_raw(p.bias, N, 4);
    poison_padding(p.a, a_rows(&p), a_len(&p));
    poison_padding(p.b, b_rows(&p), b_len(&p));
    return p;
}

static void drop(problem *p) { free(p->a), free(p->b), free(p->c0), free(p->bias); }

/* A (M, K) and B (K, N) as bgemm reads them: row-major, or the transpose of a stored (K, M) / (N, K). */
static sgemm_mat mat_a(const problem *p) {
    return p->at ? (sgemm_mat){p->a, 1, a_len(p)} : (sgemm_mat){p->a, a_len(p), 1};
}
static sgemm_mat mat_b(const problem *p) {
    return p->bt ? (sgemm_mat){p->b, 1, b_len(p)} : (sgemm_mat){p->b, b_len(p), 1};
}
static double at(sgemm_mat m, size_t i, size_t j) { return m.p[i * m.rs + j * m.cs]; }

static float *copy_c(const problem *p) {
    float *c = malloc(p->M * p->ldc * sizeof *c);
    assert_non_null(c);
    memcpy(c, p->c0, p->M * p->ldc * sizeof *c);
    return c;
}

/* C after bgemm on `threads` threads (on the portable path or the CPU's) from the problem's C, with the
 * workspace exactly as large as promised. */
static float *run_b16(const problem *p, int start, int threads, bool portable, const uint16_t *b16);

static float *run(const problem *p, int start, int threads, bool portable) {
    return run_b16(p, start, threads, portable, NULL);
}

/* run, with B read from b16 (B in bf16, stored as p->b is) through bgemm_b16 where b16 is not NULL. */
static float *run_b16(const problem *p, int start, int threads, bool portable, const uint16_t *b16) {
    float *c = copy_c(p);
    const size_t wn = bgemm_workspace_floats(p->M, p->N, p->K, threads);
    float *work = malloc((wn + 2 * GUARD) * sizeof *work);
    assert_non_null(work);
    for (size_t i = 0; i < wn + 2 * GUARD; i++) work[i] = float_of(POISON);
    omp_set_num_threads(threads);
    bgemm_force_portable(portable);
    const sgemm_mat b = mat_b(p);
    if (b16)
        bgemm_b16(p->M, p->N, p->K, mat_a(p), (bgemm_mat16){b16, b.rs, b.cs}, c, p->ldc,
                  start == START_BIAS ? p->bias : NULL, start == START_C, work + GUARD, threads);
    else
        bgemm(p->M, p->N, p->K, mat_a(p), b, c, p->ldc, start == START_BIAS ? p->bias : NULL, start == START_C,
              work + GUARD, threads);
    bgemm_force_portable(false);
    for (size_t i = 0; i < GUARD; i++) {
        assert_true(bits_of(work[i]) == POISON);
        assert_true(bits_of(work[GUARD + wn + i]) == POISON);
    }
    free(work);
    return c;
}

/* Every element within float32 rounding of K additions of the double reference; C's padding intact. */
static void check_values(const problem *p, const float *c, int start, bool portable) {
    const sgemm_mat a = mat_a(p), b = mat_b(p);
    for (size_t i = 0; i < p->M; i++) {
        for (size_t j = 0; j < p->N; j++) {
            double s = start == START_C ? p->c0[i * p->ldc + j] : start == START_BIAS ? p->bias[j] : 0.0;
            double mag = fabs(s);
            for (size_t k = 0; k < p->K; k++) {
                const double prod = at(a, i, k) * at(b, k, j);
                s += prod;
                mag += fabs(prod);
            }
            const double g = c[i * p->ldc + j];
            const double tol = (double)(p->K + 1) * 0x1p-23 * mag + FLT_MIN;
            if (!(fabs(g - s) <= tol))
                fail_msg("%s path, %zux%zux%zu at=%d bt=%d start %d, element (%zu, %zu): got %.9g, want %.9g "
                         "(tolerance %.3g)",
                         portable ? "portable" : "AVX512_BF16", p->M, p->N, p->K, p->at, p->bt, start, i, j, g, s, tol);
        }
        for (size_t j = p->N; j < p->ldc; j++)
            assert_true(bits_of(c[i * p->ldc + j]) == bits_of(p->c0[i * p->ldc + j]));
    }
}

/* The kernels may use at most this (the cap a test variant sets), read before any path is chosen. */
static kernel_isa top;

/* The paths this CPU runs: the portable one always, the AVX512_BF16 tile where bgemm_enabled(), and the AMX
 * tiles where the kernels may use them (the vdpbf16ps tile then under a cap). */
static int n_paths(void) { return 1 + (top >= KERNEL_ISA_AVX512_BF16) + (top >= KERNEL_ISA_AMX_BF16); }
static const char *path_name(int path) { return path == 0 ? "portable" : path == 1 ? "AVX512_BF16" : "AMX"; }

/* Selects path: the cap that picks the tile (bgemm_force_portable, which run and the tests set from the
 * result, picks the portable kernel); whether it is the portable one. */
static bool path_portable(int path) {
    kernel_isa_cap(path == 1 ? KERNEL_ISA_AVX512_BF16 : top);
    return path == 0;
}

static void test_values(void **state) {
    (void)state;
    for (int path = 0; path < n_paths(); path++) {
        size_t products = 0;
        for (size_t s = 0; s < N_SHAPES; s++)
            for (int layout = 0; layout < 4; layout++) {
                problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], layout & 1, layout & 2);
                for (int start = START_ZERO; start <= START_BIAS; start++) {
                    float *c = run(&p, start, 2, path_portable(path));
                    check_values(&p, c, start, path_portable(path));
                    free(c);
                    products++;
                }
                drop(&p);
            }
        printf("bgemm: %zu products within the reference bound on the %s path\n", products, path_name(path));
    }
}

/* 1, 2 and 3 threads: the same bits, for products split by columns and by rows, on each path. Rows: M, N, K,
 * A by columns, B by columns; the last splits by columns over three blocks of K, B by columns as a linear
 * layer's weight in its forward. */
static void test_same_bits_any_thread_count(void **state) {
    (void)state;
    static const size_t big[][5] = {
        {300, 100, 520, 1, 0}, {70, 700, 64, 0, 1}, {256, 260, 150, 0, 0}, {136, 300, 1030, 0, 1}};
    for (int path = 0; path < n_paths(); path++)
        for (size_t s = 0; s < sizeof big / sizeof big[0]; s++) {
            problem p = make(big[s][0], big[s][1], big[s][2], big[s][3], big[s][4]);
            float *one = run(&p, START_C, 1, path_portable(path));
            for (int t = 2; t <= 3; t++) {
                float *more = run(&p, START_C, t, path_portable(path));
                assert_memory_equal(one, more, p.M * p.ldc * sizeof *one);
                free(more);
            }
            free(one);
            drop(&p);
        }
}

/* Inputs that are not bf16 values are rounded to nearest, ties to even, when packed: the same bits as the
 * product of the inputs rounded here. Every fifth value is put exactly halfway between two bf16 values. */
static void test_rounds_unrounded_inputs(void **state) {
    (void)state;
    for (int path = 0; path < n_paths(); path++)
        for (int layout = 0; layout < 4; layout++) {
            problem p = make(21, 45, 37, layout & 1, layout & 2);
            float *a_raw = malloc(a_rows(&p) * a_len(&p) * sizeof *a_raw);
            float *b_raw = malloc(b_rows(&p) * b_len(&p) * sizeof *b_raw);
            assert_true(a_raw && b_raw);
            fill_raw(a_raw, a_rows(&p) * a_len(&p), 5), fill_raw(b_raw, b_rows(&p) * b_len(&p), 6);
            for (size_t i = 0; i < a_rows(&p) * a_len(&p); i += 5)
                a_raw[i] = float_of((bits_of(a_raw[i]) & 0xFFFF0000u) | 0x8000u);
            for (size_t i = 0; i < b_rows(&p) * b_len(&p); i += 5)
                b_raw[i] = float_of((bits_of(b_raw[i]) & 0xFFFF0000u) | 0x8000u);
            for (size_t i = 0; i < a_rows(&p) * a_len(&p); i++) p.a[i] = nearest_bf16(a_raw[i]);
            for (size_t i = 0; i < b_rows(&p) * b_len(&p); i++) p.b[i] = nearest_bf16(b_raw[i]);
            float *rounded = run(&p, START_ZERO, 2, path_portable(path));
            float *a_kept = p.a, *b_kept = p.b;
            p.a = a_raw, p.b = b_raw;
            float *raw = run(&p, START_ZERO, 2, path_portable(path));
            p.a = a_kept, p.b = b_kept;
            assert_memory_equal(rounded, raw, p.M * p.ldc * sizeof *raw);
            free(rounded), free(raw), free(a_raw), free(b_raw);
            drop(&p);
        }
}

/* B rounded once by bgemm_round_weights and handed over in bf16 (bgemm_b16, as a bf16 plan's kept weights):
 * the same bits as bgemm rounding the same floats as it packs them, stored by rows and by columns, on every
 * shape (odd K pads a pair from the bf16 copy too) and path. B is unrounded, every fifth value a tie and every
 * seventh a denormal (read as zero), its padding NaN (rounded too: bgemm_b16 must not read it either). A copy
 * rounded from other floats (a stale one) gives other bits. */
static void test_rounded_once_same_bits(void **state) {
    (void)state;
    for (int path = 0; path < n_paths(); path++)
        for (size_t s = 0; s < N_SHAPES; s++)
            for (int layout = 0; layout < 4; layout++) {
                problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], layout & 1, layout & 2);
                const size_t nb = b_rows(&p) * b_len(&p);
                fill_raw(p.b, nb, 7);
                for (size_t i = 0; i < nb; i += 5) p.b[i] = float_of((bits_of(p.b[i]) & 0xFFFF0000u) | 0x8000u);
                for (size_t i = 3; i < nb; i += 7) p.b[i] = ldexpf(1.5f, -130);
                poison_padding(p.b, b_rows(&p), b_len(&p));
                uint16_t *b16 = malloc(nb * sizeof *b16);
                assert_non_null(b16);
                bgemm_force_portable(path_portable(path));
                bgemm_round_weights(b16, p.b, nb);
                bgemm_force_portable(false);
                const int start = (int)(s % 3);
                float *per_call = run(&p, start, 2, path_portable(path));
                float *once = run_b16(&p, start, 2, path_portable(path), b16);
                assert_memory_equal(per_call, once, p.M * p.ldc * sizeof *once);
                if (s == N_SHAPES - 1) { /* a stale copy: one weight moved by one bf16 step */
                    b16[0] ^= 1u;
                    float *stale = run_b16(&p, START_ZERO, 1, path_portable(path), b16);
                    float *fresh = run(&p, START_ZERO, 1, path_portable(path));
                    assert_true(memcmp(stale, fresh, p.M * p.ldc * sizeof *fresh) != 0);
                    free(stale), free(fresh);
                }
                free(per_call), free(once), free(b16);
                drop(&p);
            }
}

/* C of bgemm_panels over B packed once (bgemm_pack_panels, with exactly its stage), from the problem's C: the
 * product of A's first K columns and B's first K rows (K even or all of them) and N columns. */
static float *run_panels(const problem *p, size_t K, size_t N, bool accumulate, bool portable) {
    float *c = copy_c(p);
    const size_t words = bgemm_panels_words(p->K, p->N), sn = bgemm_panels_stage_floats();
    const size_t wn = bgemm_workspace_floats(p->M, N, K, 1);
    uint32_t *panels = malloc(words * sizeof *panels);
    float *stage = malloc(sn * sizeof *stage), *work = malloc(wn * sizeof *work);
    assert_true(panels && stage && work);
    bgemm_force_portable(portable);
    bgemm_pack_panels(panels, p->K, p->N, mat_b(p), stage);
    bgemm_panels(p->M, N, K, mat_a(p), (bgemm_panels_of){panels, p->K, p->N}, c, p->ldc, accumulate, work, 1);
    bgemm_force_portable(false);
    free(panels), free(stage), free(work);
    return c;
}

/* B packed once and read in place (bgemm_panels) gives bgemm's bits on every shape, layout and path, starting
 * from zero or from C, also over leading parts of B: the first even number of its rows (attention's keys up to
 * a block of queries) and fewer columns. */
static void test_panels_same_bits(void **state) {
    (void)state;
    for (int path = 0; path < n_paths(); path++)
        for (size_t s = 0; s < N_SHAPES; s++)
            for (int layout = 0; layout < 4; layout++) {
                problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], layout & 1, layout & 2);
                const bool accumulate = s % 2;
                float *once = run_panels(&p, p.K, p.N, accumulate, path_portable(path));
                float *per_call = run(&p, accumulate ? START_C : START_ZERO, 1, path_portable(path));
                assert_memory_equal(per_call, once, p.M * p.ldc * sizeof *once);
                free(once), free(per_call);
                if (p.K >= 4 && p.N >= 2) { /* the first even K - 2 (or fewer) rows and N - 1 columns */
                    const size_t k = (p.K - 2) / 2 * 2, n = p.N - 1;
                    float *part = run_panels(&p, k, n, accumulate, path_portable(path));
                    float *want = copy_c(&p), *work = malloc(bgemm_workspace_floats(p.M, n, k, 1) * sizeof *work);
                    assert_non_null(work);
                    bgemm_force_portable(path_portable(path));
                    bgemm(p.M, n, k, mat_a(&p), mat_b(&p), want, p.ldc, NULL, accumulate, work, 1);
                    bgemm_force_portable(false);
                    assert_memory_equal(want, part, p.M * p.ldc * sizeof *part);
                    free(part), free(want), free(work);
                }
                drop(&p);
            }
}

/* bgemm_rounded gives the bits of bgemm then bf16_round_pack over C (bf16_round_floats without a packed copy),
 * on every shape and path, on 2 threads, from the floats of B and from its bf16 copy, with a bias and without;
 * C's padding and the packed copy's untouched. */
static void test_rounded_output_same_bits(void **state) {
    (void)state;
    for (int path = 0; path < n_paths(); path++)
        for (size_t s = 0; s < N_SHAPES; s++) {
            problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], s % 2, s % 3 == 0);
            const size_t nc = p.M * p.ldc, nb = b_rows(&p) * b_len(&p);
            const int start = s % 2 ? START_BIAS : START_ZERO;
            uint16_t *b16 = malloc(nb * sizeof *b16), *want16 = malloc(nc * sizeof *want16);
            uint16_t *got16 = malloc(nc * sizeof *got16);
            path_portable(path); /* the workspace of this path's kernel */
            float *work = malloc(bgemm_workspace_floats(p.M, p.N, p.K, 2) * sizeof *work);
            assert_true(b16 && want16 && got16 && work);
            bgemm_force_portable(path_portable(path));
            bgemm_round_weights(b16, p.b, nb);
            bgemm_force_portable(false);
            float *want = run(&p, start, 2, path_portable(path));
            memset(want16, 0xAB, nc * sizeof *want16);
            for (size_t i = 0; i < p.M; i++) bf16_round_pack(want + i * p.ldc, want16 + i * p.ldc, p.N);
            for (int from16 = 0; from16 < 2; from16++)
                for (int packed = 0; packed < 2; packed++) {
                    float *got = copy_c(&p);
                    const sgemm_mat b = mat_b(&p);
                    const bgemm_mat16 m16 = {from16 ? b16 : NULL, b.rs, b.cs};
                    memset(got16, 0xAB, nc * sizeof *got16);
                    omp_set_num_threads(2);
                    bgemm_force_portable(path_portable(path));
                    bgemm_rounded(p.M, p.N, p.K, mat_a(&p), b, m16, got, p.ldc,
                                  start == START_BIAS ? p.bias : NULL, packed ? got16 : NULL, work, 2);
                    bgemm_force_portable(false);
                    assert_memory_equal(want, got, nc * sizeof *got);
                    if (packed) assert_memory_equal(want16, got16, nc * sizeof *got16);
                    free(got);
                }
            free(want), free(b16), free(want16), free(got16), free(work);
            drop(&p);
        }
}

/* B of p in bf16 as bgemm_round_weights rounds it on `path`, padding included. */
static uint16_t *b16_of(const problem *p, int path) {
    const size_t nb = b_rows(p) * b_len(p);
    uint16_t *b16 = malloc(nb * sizeof *b16);
    assert_non_null(b16);
    bgemm_force_portable(path_portable(path));
    bgemm_round_weights(b16, p->b, nb);
    bgemm_force_portable(false);
    return b16;
}

/* bgemm_a16: A handed over in bfloat16 by rows (as a layer's packed input: bf16_pack's bits, denormals kept,
 * which the product reads as zero) and B in bf16 give the bits of bgemm on the floats, rounded or not, with a
 * bias and without, on every shape (odd K pads a pair), every path, 1 and 2 threads; so does bgemm_panels_out
 * from the same A and B's panels packed once (bgemm_pack_panels16). */
static void test_a16_same_bits(void **state) {
    (void)state;
    for (int path = 0; path < n_paths(); path++)
        for (size_t s = 0; s < N_SHAPES; s++)
            for (int threads = 1; threads <= 2; threads++) {
                problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], false, s % 2);
                const size_t na = a_rows(&p) * a_len(&p), nc = p.M * p.ldc;
                for (size_t i = 3; i < na; i += 7) p.a[i] = ldexpf(1.5f, -130) * (i % 2 ? 1.0f : -1.0f);
                for (size_t i = 0; i < na; i++) p.a[i] = bf16_round(p.a[i]);
                poison_padding(p.a, a_rows(&p), a_len(&p));
                const int start = s % 3 == 1 ? START_BIAS : START_ZERO;
                const float *bias = start == START_BIAS ? p.bias : NULL;
                uint16_t *a16 = malloc(na * sizeof *a16), *b16 = b16_of(&p, path);
                uint16_t *want16 = malloc(nc * sizeof *want16), *got16 = malloc(nc * sizeof *got16);
                float *work = malloc(bgemm_workspace_floats(p.M, p.N, p.K, threads) * sizeof *work);
                assert_true(a16 && want16 && got16 && work);
                bf16_pack(a16, p.a, na);
                const sgemm_mat bm = mat_b(&p);
                uint32_t *panels = malloc(bgemm_panels_words(p.K, p.N) * sizeof *panels);
                float *stage = malloc(bgemm_panels_stage_floats() * sizeof *stage);
                assert_true(panels && stage);
                bgemm_force_portable(path_portable(path));
                bgemm_pack_panels16(panels, p.K, p.N, (bgemm_mat16){b16, bm.rs, bm.cs}, stage);
                bgemm_force_portable(false);
                free(stage);
                float *want = run(&p, start, threads, path_portable(path));
                memset(want16, 0xAB, nc * sizeof *want16);
                for (int round = 0; round <= 1; round++) {
                    float *got = copy_c(&p);
                    memset(got16, 0xAB, nc * sizeof *got16);
                    if (round)
                        for (size_t i = 0; i < p.M; i++) bf16_round_pack(want + i * p.ldc, want16 + i * p.ldc, p.N);
                    const sgemm_mat b = mat_b(&p);
                    omp_set_num_threads(threads);
                    bgemm_force_portable(path_portable(path));
                    bgemm_a16(p.M, p.N, p.K, (bgemm_mat16){a16, a_len(&p), 1}, (bgemm_mat16){b16, b.rs, b.cs}, got,
                              p.ldc, bias, round, got16, work, threads);
                    bgemm_force_portable(false);
                    assert_memory_equal(want, got, nc * sizeof *got);
                    assert_memory_equal(want16, got16, nc * sizeof *got16);
                    /* the same from B's panels packed once (a layer's kept weight) */
                    memcpy(got, p.c0, nc * sizeof *got);
                    memset(got16, 0xAB, nc * sizeof *got16);
                    bgemm_force_portable(path_portable(path));
                    bgemm_panels_out(p.M, p.N, p.K, (sgemm_mat){0}, (bgemm_mat16){a16, a_len(&p), 1},
                                     (bgemm_panels_of){panels, p.K, p.N}, got, p.ldc, bias, round, got16, work, threads);
                    bgemm_force_portable(false);
                    assert_memory_equal(want, got, nc * sizeof *got);
                    assert_memory_equal(want16, got16, nc * sizeof *got16);
                    free(got);
                }
                free(want), free(a16), free(b16), free(want16), free(got16), free(work), free(panels);
                drop(&p);
            }
}

/* bgemm_rounded's rounding on the values rounding is about: C = bias + 0 (A zero) takes each bias as it is, and
 * the biases hold ties to even both ways, a NaN whose payload lies only in the dropped bits, infinities, the
 * largest float (past the last bf16's midpoint: infinity) and small normal values of both signs; the bits
 * of bf16_round_pack over bgemm's C, on both paths, 3 rows of 40 columns (a tile's edge inside). */
static void test_rounded_output_special_values(void **state) {
    (void)state;
    static const uint32_t specials[] = {0x3F808000u, 0x3F818000u, 0x7F800001u, 0xFF800000u, 0x7F800000u,
                                        0x7F7FFFFFu, 0x00800000u, 0x80812345u, 0x3F7FFFFFu, 0xBF808001u};
    const size_t M = 3, N = 40, K = 2, n = sizeof specials / sizeof specials[0];
    float a[3 * 2] = {0}, b[2 * 40], bias[40], want[3 * 40], got[3 * 40];
    uint16_t want16[3 * 40], got16[3 * 40];
    for (size_t t = 0; t < K * N; t++) b[t] = 1.0f;
    for (size_t t = 0; t < N; t++) bias[t] = float_of(specials[t % n]);
    for (int path = 0; path < n_paths(); path++) {
        bgemm_force_portable(path_portable(path));
        float *work = malloc(bgemm_workspace_floats(M, N, K, 1) * sizeof *work);
        assert_non_null(work);
        bgemm(M, N, K, (sgemm_mat){a, K, 1}, (sgemm_mat){b, N, 1}, want, N, bias, false, work, 1);
        bf16_round_pack(want, want16, M * N);
        bgemm_rounded(M, N, K, (sgemm_mat){a, K, 1}, (sgemm_mat){b, N, 1}, (bgemm_mat16){NULL, 0, 0}, got, N, bias,
                      got16, work, 1);
        bgemm_force_portable(false);
        assert_memory_equal(want, got, sizeof got);
        assert_memory_equal(want16, got16, sizeof got16);
        assert_true(bits_of(got[0]) == 0x3F800000u && bits_of(got[1]) == 0x3F820000u); /* ties to even */
        assert_true(isnan(got[2]) && isinf(got[5]));
        free(work);
    }
}

/* One element, C (1 x 1) = bias + a . b over k = 0, 1, as the given path computes it. */
static float lane(const float a[2], const float b[2], float bias, bool portable) {
    float c = 0.0f, *work = malloc(bgemm_workspace_floats(1, 1, 2, 1) * sizeof *work);
    assert_non_null(work);
    bgemm_force_portable(portable);
    bgemm(1, 1, 2, (sgemm_mat){a, 2, 1}, (sgemm_mat){b, 1, 1}, &c, 1, &bias, false, work, 1);
    bgemm_force_portable(false);
    free(work);
    return c;
}

/* The documented lane of vdpbf16ps, each case built so that another rule gives other bits:
 *  - order: 1 + 1.5 2^-24 (k = 1) rounds to 1 + 2^-23, + 2^-24 (k = 0) is a tie that rounds to 1 + 2^-22; the
 *    even k first (or both products summed with one rounding) gives 1 + 2^-23;
 *  - denormal input: 2^-130 (a bf16 denormal) times 2^100 counts as 0 times 2^100;
 *  - denormal result: 2^-70 times 2^-70 is 2^-140, a float32 denormal, flushed to zero. */
static void test_documented_lane(void **state) {
    (void)state;
    static const struct {
        const char *what;
        float a[2], b[2], bias, want;
    } cases[] = {
        {"odd k before even k", {0x1p-24f, 0x1.8p-24f}, {1.0f, 1.0f}, 1.0f, 1.0f + 0x1p-22f},
        {"denormal input read as zero", {0x1p-130f, 0.0f}, {0x1p100f, 0.0f}, 0.0f, 0.0f},
        {"denormal result flushed", {0x1p-70f, 0.0f}, {0x1p-70f, 0.0f}, 0.0f, 0.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const float got = lane(cases[i].a, cases[i].b, cases[i].bias, true);
        if (bits_of(got) != bits_of(cases[i].want))
            fail_msg("portable lane, %s: got %a, want %a", cases[i].what, (double)got, (double)cases[i].want);
        for (int path = 1; path < n_paths(); path++) {
            path_portable(path);
            const float cpu = lane(cases[i].a, cases[i].b, cases[i].bias, false);
            printf("bgemm: this CPU's %s, %s: %a (%s)\n", path == 1 ? "vdpbf16ps" : "tdpbf16ps", cases[i].what,
                   (double)cpu, bits_of(cpu) == bits_of(cases[i].want) ? "as vdpbf16ps is documented" : "otherwise");
        }
        kernel_isa_cap(top);
    }
}

/* Where both paths run: how many elements of C they give different bits for (zero when this CPU's vdpbf16ps
 * rounds as documented, which the portable kernel models). Reported, not required: both paths already meet
 * the reference bound, and a CPU may order the lane's two additions otherwise. */
static void test_report_paths_agree(void **state) {
    (void)state;
    SKIP_UNLESS(bgemm_enabled(), "AVX512_BF16 (vdpbf16ps)");
    for (int path = 1; path < n_paths(); path++) {
    path_portable(path);
    size_t differ = 0, total = 0;
    double worst = 0.0;
    for (size_t s = 0; s < N_SHAPES; s++) {
        problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], s & 1, s & 2);
        float *cpu = run(&p, START_BIAS, 2, false), *portable = run(&p, START_BIAS, 2, true);
        for (size_t i = 0; i < p.M; i++)
            for (size_t j = 0; j < p.N; j++) {
                const float x = cpu[i * p.ldc + j], y = portable[i * p.ldc + j];
                total++;
                if (bits_of(x) != bits_of(y)) {
                    differ++;
                    const double rel = fabs((double)x - y) / fmax(fabs((double)y), FLT_MIN);
                    worst = rel > worst ? rel : worst;
                }
            }
        free(cpu), free(portable);
        drop(&p);
    }
    printf("bgemm: %s and portable paths differ in %zu of %zu elements (largest relative gap %.3g)\n",
           path_name(path), differ, total, worst);
    }
    kernel_isa_cap(top);
}

/* K = 0: C is its start, untouched when accumulating. */
static void test_empty_inner_dimension(void **state) {
    (void)state;
    problem p = make(5, 7, 0, false, false);
    for (int path = 0; path < n_paths(); path++)
        for (int start = START_ZERO; start <= START_BIAS; start++) {
            float *c = run(&p, start, 2, path_portable(path));
            check_values(&p, c, start, path_portable(path));
            free(c);
        }
    drop(&p);
}

/* The workspace grows with every size, so the largest call's covers every smaller call of a plan. */
static void test_workspace_monotone(void **state) {
    (void)state;
    for (size_t m = 1; m < 600; m += 37)
        for (size_t n = 1; n < 1200; n += 101)
            for (size_t k = 1; k < 1300; k += 53) {
                const size_t w = bgemm_workspace_floats(m, n, k, 2);
                assert_true(bgemm_workspace_floats(m + 1, n, k, 2) >= w);
                assert_true(bgemm_workspace_floats(m, n + 1, k, 2) >= w);
                assert_true(bgemm_workspace_floats(m, n, k + 1, 2) >= w);
                assert_true(bgemm_workspace_floats(m, n, k, 3) >= w);
            }
}

/* Which plans take bgemm is theirs to say (plan_compute_of), from their request and the CPU: bf16 plans that
 * leave it to snug wherever its products pay (kernel_bf16_products_pay) and nowhere else (float32 products on the
 * bfloat16 values), bf16 plans that ask for snug's own on every CPU (the portable kernel), never a plan that
 * asks for the BLAS, never a float32 plan; and forcing the portable kernel changes no plan. */
static void test_plans_choose_it(void **state) {
    (void)state;
    const kernel_isa now = kernel_isa_now();
    const snug_products all[] = {SNUG_PRODUCTS_AUTO, SNUG_PRODUCTS_BLAS, SNUG_PRODUCTS_SNUG};
    for (int capped = 0; capped < 2; capped++) {
        if (capped) kernel_isa_cap(KERNEL_ISA_AVX512);
        const bool fast = kernel_bf16_products_pay();
        const op_product fp32 = sgemm_enabled() ? OP_PRODUCT_SGEMM : OP_PRODUCT_BLAS;
        bgemm_force_portable(capped);
        assert_int_equal(plan_compute_of(SNUG_PRECISION_BF16, SNUG_PRODUCTS_AUTO).product, fast ? OP_PRODUCT_BGEMM : fp32);
        assert_int_equal(plan_compute_of(SNUG_PRECISION_BF16, SNUG_PRODUCTS_SNUG).product, OP_PRODUCT_BGEMM);
        assert_int_equal(plan_compute_of(SNUG_PRECISION_BF16, SNUG_PRODUCTS_BLAS).product, OP_PRODUCT_BLAS);
        assert_int_equal(plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_BLAS).product, OP_PRODUCT_BLAS);
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i] != SNUG_PRODUCTS_BLAS) assert_int_equal(plan_compute_of(SNUG_PRECISION_FP32, all[i]).product, fp32);
    }
    bgemm_force_portable(false);
    kernel_isa_cap(now);
}

int main(void) {
    top = kernel_isa_now();
    printf("bgemm: paths run here: portable%s%s\n", bgemm_enabled() ? ", AVX512_BF16" : " only (no AVX512_BF16 here)",
           top >= KERNEL_ISA_AMX_BF16 ? " and AMX" : "");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_plans_choose_it),
        cmocka_unit_test(test_same_bits_any_thread_count),
        cmocka_unit_test(test_rounds_unrounded_inputs),
        cmocka_unit_test(test_rounded_once_same_bits),
        cmocka_unit_test(test_panels_same_bits),
        cmocka_unit_test(test_rounded_output_same_bits),
        cmocka_unit_test(test_a16_same_bits),
        cmocka_unit_test(test_rounded_output_special_values),
        cmocka_unit_test(test_documented_lane),
        cmocka_unit_test(test_report_paths_agree),
        cmocka_unit_test(test_empty_inner_dimension),
        cmocka_unit_test(test_workspace_monotone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
