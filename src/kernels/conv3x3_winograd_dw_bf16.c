/* The products of Winograd's weight gradient (conv3x3_winograd_dw.c) on bfloat16 pairs (winograd_dw_block.h).
 *
 * Why pairs of tiles: the products dU[xi] (co, cp) = sum over tiles of Y[xi][t][o] V[xi][t][i] have the tile
 * as their inner dimension, so vdpbf16ps's pair is two tiles: one 32-bit word holds tile 2k's value in its low
 * half and tile 2k + 1's in its high half, a vector of 16 words is 16 input channels of one pair of tiles, and
 * the output channel's word is broadcast. Half the instructions of the float32 products for the same sums, from
 * operands of half the bytes, so a block holds twice the tiles and each register tile's loads and stores of dU
 * are spread over as many pairs as the float32 products have tiles. The transforms stay float32; their results
 * are rounded once each, as they are stored (conv3x3_winograd_dw.c).
 *
 * The AVX512_BF16 tile is compiled through a function attribute and run only where the CPU has it; the plain-C
 * twin computes each lane as vdpbf16ps is documented to (dpbf16_lane.h), over the same paired rows. */
#include "kernels/winograd_dw_block.h"

#include <stdint.h>
#include <string.h>

#include "kernels/dpbf16_lane.h"
#include "kernels/dpbf16_pairs.h"

/* Word i of a paired row. */
static uint32_t word_at(const float *row, size_t i) {
    uint32_t w;
    memcpy(&w, row + i, sizeof w);
    return w;
}

/* wdw_tile_fn over np pairs, a lane at a time. */
static void dtile_portable(float *du, size_t cp, const float *y, size_t cq, const float *v, size_t mr, size_t nv,
                           size_t np) {
    for (size_t o = 0; o < mr; o++)
        for (size_t i = 0; i < 16 * nv; i++) {
            float acc = 0.0f;
            for (size_t k = 0; k < np; k++) acc = dpbf16_lane(acc, word_at(v + k * cp, i), word_at(y + k * cq, o));
            du[o * cp + i] += acc;
        }
}

#ifdef SNUG_AVX512

#define P_INIT1(I, J) __m512 a##I##J = _mm512_setzero_ps();
#define P_INIT(I) P_INIT1(I, 0) P_INIT1(I, 1) P_INIT1(I, 2)
#define P_DOT(I)                                                                                              \
    if (mr > I) {                                                                                             \
        const __m512bh yb = (__m512bh)_mm512_set1_epi32((int)word_at(yk, I));                                \
        a##I##0 = _mm512_dpbf16_ps(a##I##0, v0, yb);                                                          \
        if (nv > 1) a##I##1 = _mm512_dpbf16_ps(a##I##1, v1, yb);                                              \
        if (nv > 2) a##I##2 = _mm512_dpbf16_ps(a##I##2, v2, yb);                                              \
    }
#define P_STORE1(I, J)                                                                                        \
    if (mr > I && nv > J) {                                                                                   \
        float *d = du + (I) * cp + 16 * (J);                                                                  \
        _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), a##I##J));                                      \
    }
#define P_STORE(I) P_STORE1(I, 0) P_STORE1(I, 1) P_STORE1(I, 2)
#define P_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* du (rows cp apart) at rows [0, mr), vectors [0, nv) += the np pairs of y (words cq apart) and v (cp apart);
 * mr and nv constants. */
static inline __attribute__((always_inline)) BF16 void ptile(size_t mr, size_t nv, float *du, size_t cp,
                                                              const float *y, size_t cq, const float *v, size_t np) {
    P_ROWS(P_INIT)
    for (size_t k = 0; k < np; k++) {
        const float *yk = y + k * cq, *vk = v + k * cp;
        const __m512bh v0 = (__m512bh)_mm512_loadu_si512(vk);
        const __m512bh v1 = nv > 1 ? (__m512bh)_mm512_loadu_si512(vk + 16) : v0;
        const __m512bh v2 = nv > 2 ? (__m512bh)_mm512_loadu_si512(vk + 32) : v0;
        P_ROWS(P_DOT)
    }
    P_ROWS(P_STORE)
}

#define PTILE_NV(R) AVX512_NV_OF_3(nv, ptile, R, du, cp, y, cq, v, np)

#define PTILE_NEXT(K) du += (K) * cp, y += (K);

/* wdw_tile_fn over np pairs: a full tile of WDW_MR rows, or the last ones as tiles of 4, 2 and 1. */
static BF16 void dtile_bf16(float *du, size_t cp, const float *y, size_t cq, const float *v, size_t mr, size_t nv,
                            size_t np) {
    AVX512_ROWS_OF_8(mr, PTILE_NV, PTILE_NEXT);
}
#endif

void wdw_bf16_products(const wdw_block *b, float *du, bool hw) {
#ifdef SNUG_AVX512
    if (hw) {
        wdw_block_products(b, du, dtile_bf16, (b->nt + 1) / 2);
        return;
    }
#endif
    (void)hw;
    wdw_block_products(b, du, dtile_portable, (b->nt + 1) / 2);
}
