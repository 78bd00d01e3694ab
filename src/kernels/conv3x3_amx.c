/* conv3x3_amx (conv3x3_amx.h). The tile code is compiled through a function attribute (the build has no
 * -march) and called only where kernel_isa_now() reaches KERNEL_ISA_AMX_BF16; the weights' packing is plain C.
 *
 * Grid products: tiles 0-3 hold C, 4-5 the weights' tiles of two plane blocks and 6-7 the grid's of two
 * vectors; wide, 4 the weights' tile and 5-7 the grid's (the fourth vector reusing 5). Weight gradient: tiles
 * 0-4 hold C for five taps (then four), 5 dy's pairs, 6 and 7 x's pairs in turn. */
#include "kernels/conv3x3_amx.h"

#include "core/checked.h"
#include "kernels/amx_tiles.h"
#include "kernels/dpbf16_lane.h"

static size_t pairs(size_t n) { return (n + 1) / 2; }

/* The pairs one instruction takes: all of them up to 16, else 16. */
static size_t depth(size_t np) { return np < 16 ? np : 16; }

bool conv3x3_amx_takes(size_t chans) {
    const size_t np = pairs(chans);
    return np >= 1 && (np <= 16 || np % 16 == 0);
}

/* The planes packed: a tile of 16 from any plane of the layer stays inside them (a group of planes may start
 * anywhere: its tiles' rows past the group read the next planes' weights, or zeros, into rows of C that are
 * never stored). */
static size_t planes_packed(size_t planes) { return (planes + 15) / 16 * 16 + 16; }

size_t conv3x3_amx_weights_words(size_t planes, size_t chans) {
    size_t n;
    if (planes > SIZE_MAX - 32 || !size_mul(planes_packed(planes), 9, &n) || !size_mul(n, pairs(chans), &n))
        return SIZE_MAX;
    return n;
}

/* The bfloat16 pair of channels 2p, 2p + 1 of plane o at one tap (0 past the last channel or plane). */
static uint32_t weight_pair(const float *w, size_t planes, size_t chans, bool flip, size_t o, size_t p, size_t tap) {
    uint32_t word = 0;
    for (size_t half = 0; half < 2 && o < planes; half++) {
        const size_t k = 2 * p + half;
        if (k >= chans) continue;
        const float v = flip ? w[(k * planes + o) * 9 + 8 - tap] : w[(o * chans + k) * 9 + tap];
        word |= dpbf16_of(v) << (16 * half);
    }
    return word;
}

void conv3x3_amx_pack_weights(uint32_t *dst, const float *w, size_t planes, size_t chans, bool flip, size_t t,
                              size_t T) {
    const size_t np = pairs(chans), all = planes_packed(planes);
    const size_t lo = all * t / T, hi = all * (t + 1) / T;
    for (size_t o = lo; o < hi; o++)
        for (size_t tap = 0; tap < 9; tap++)
            for (size_t p = 0; p < np; p++) dst[(o * 9 + tap) * np + p] = weight_pair(w, planes, chans, flip, o, p, tap);
}

#ifdef AMX_TILES_BUILD
AMX void conv3x3_amx_begin_grid(size_t np, bool wide) {
    const size_t kq = depth(np);
    amx_tile_config cfg;
    amx_tile_config_init(&cfg);
    for (int t = 0; t < 4; t++) amx_tile_shape(&cfg, t, 16, 64);
    for (int t = 4; t < 8; t++) {
        const bool weights = t == 4 || (t == 5 && !wide);
        amx_tile_shape(&cfg, t, weights ? 16 : kq, weights ? 4 * kq : 64);
    }
    amx_tile_config_load(&cfg);
}

AMX void conv3x3_amx_begin_dw(void) { amx_tile_config_load_square(); }

AMX void conv3x3_amx_end(void) { _tile_release(); }

/* C tile T (= its stage) started from its stage or zero, and stored back; tile numbers must be constants. */
#define C_START(T)                                                                                            \
    if (from_stage) _tile_loadd(T, stage + (T) * 256, 64);                                                    \
    else _tile_zero(T);
#define C_STORE(T) _tile_stored(T, stage + (T) * 256, 64);

/* The taps and pair blocks of one call: `at` the weights' tile of block 0, bo the grid's word offset. */
#define GRID_LOOP(BODY)                                                                                       \
    const size_t kq = depth(g->np), nk = g->np / kq, next = 16 * 9 * g->np;                                   \
    const long sa = (long)(4 * 9 * g->np), sb = (long)(4 * g->stride);                                        \
    for (size_t tap = 0; tap < 9; tap++)                                                                      \
        for (size_t k = 0; k < nk; k++) {                                                                     \
            const uint32_t *at = a + tap * g->np + k * kq;                                                    \
            const size_t bo = tap / 3 * g->wp + tap % 3 + k * 16 * g->stride;                                 \
            BODY                                                                                              \
        }                                                                                                     \
    (void)next;

/* Two plane blocks by two vectors; NB and NV are constants at every call site. */
static inline __attribute__((always_inline)) AMX void grid22(const conv3x3_amx_grid *g, const uint32_t *a,
                                                              const uint32_t *const *src, size_t NB, size_t NV,
                                                              float *stage, bool from_stage) {
    C_START(0)
    if (NV > 1) { C_START(1) }
    if (NB > 1) { C_START(2) }
    if (NB > 1 && NV > 1) { C_START(3) }
    GRID_LOOP({
        _tile_loadd(4, at, sa);
        _tile_loadd(6, src[0] + bo, sb);
        _tile_dpbf16ps(0, 4, 6);
        if (NV > 1) {
            _tile_loadd(7, src[1] + bo, sb);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (NB > 1) {
            _tile_loadd(5, at + next, sa);
            _tile_dpbf16ps(2, 5, 6);
            if (NV > 1) _tile_dpbf16ps(3, 5, 7);
        }
    })
    C_STORE(0)
    if (NV > 1) { C_STORE(1) }
    if (NB > 1) { C_STORE(2) }
    if (NB > 1 && NV > 1) { C_STORE(3) }
}

/* One plane block by up to four vectors (wide). */
static inline __attribute__((always_inline)) AMX void grid14(const conv3x3_amx_grid *g, const uint32_t *a,
                                                              const uint32_t *const *src, size_t NV, float *stage,
                                                              bool from_stage) {
    C_START(0)
    if (NV > 1) { C_START(1) }
    if (NV > 2) { C_START(2) }
    if (NV > 3) { C_START(3) }
    GRID_LOOP({
        _tile_loadd(4, at, sa);
        _tile_loadd(5, src[0] + bo, sb);
        _tile_dpbf16ps(0, 4, 5);
        if (NV > 1) {
            _tile_loadd(6, src[1] + bo, sb);
            _tile_dpbf16ps(1, 4, 6);
        }
        if (NV > 2) {
            _tile_loadd(7, src[2] + bo, sb);
            _tile_dpbf16ps(2, 4, 7);
        }
        if (NV > 3) {
            _tile_loadd(5, src[3] + bo, sb);
            _tile_dpbf16ps(3, 4, 5);
        }
    })
    C_STORE(0)
    if (NV > 1) { C_STORE(1) }
    if (NV > 2) { C_STORE(2) }
    if (NV > 3) { C_STORE(3) }
}

AMX void conv3x3_amx_grid_block(const conv3x3_amx_grid *g, const uint32_t *a, const uint32_t *const *src,
                                size_t nb, size_t nv, bool wide, float *stage, bool from_stage) {
    if (wide) {
        if (nv == 4) grid14(g, a, src, 4, stage, from_stage);
        else if (nv == 3) grid14(g, a, src, 3, stage, from_stage);
        else if (nv == 2) grid14(g, a, src, 2, stage, from_stage);
        else grid14(g, a, src, 1, stage, from_stage);
    } else if (nb == 2) {
        if (nv == 2) grid22(g, a, src, 2, 2, stage, from_stage);
        else grid22(g, a, src, 2, 1, stage, from_stage);
    } else {
        if (nv == 2) grid22(g, a, src, 1, 2, stage, from_stage);
        else grid22(g, a, src, 1, 1, stage, from_stage);
    }
}

/* Taps [T0, T0 + N) into C tiles 0 to N - 1 over the pixel pairs, x's tiles alternating between 6 and 7. */
#define DW_TAP(I, B)                                                                                          \
    if (I < N) {                                                                                              \
        _tile_loadd(B, tap[T0 + I] + j * 16, 64);                                                             \
        _tile_dpbf16ps(I, 5, B);                                                                              \
    }
#define DW_OUT(I)                                                                                             \
    if (I < N) _tile_stored(I, acc + (T0 + I) * 16, (long)(9 * 16 * sizeof *acc));

static inline __attribute__((always_inline)) AMX void dw_taps(const uint32_t *d, long sd,
                                                               const uint32_t *const *tap, size_t nj, float *acc,
                                                               size_t T0, size_t N) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    if (N > 4) _tile_zero(4);
    for (size_t j = 0; j < nj; j += 16) {
        _tile_loadd(5, d + j, sd);
        DW_TAP(0, 6) DW_TAP(1, 7) DW_TAP(2, 6) DW_TAP(3, 7) DW_TAP(4, 6)
    }
    DW_OUT(0) DW_OUT(1) DW_OUT(2) DW_OUT(3) DW_OUT(4)
}

AMX void conv3x3_amx_dw_block(const uint32_t *d, size_t d_stride, const uint32_t *const *tap, size_t nj,
                              float *acc) {
    const long sd = (long)(4 * d_stride);
    dw_taps(d, sd, tap, nj, acc, 0, 5);
    dw_taps(d, sd, tap, nj, acc, 5, 4);
}
#else
void conv3x3_amx_begin_grid(size_t np, bool wide) { (void)np, (void)wide; }
void conv3x3_amx_begin_dw(void) {}
void conv3x3_amx_end(void) {}
void conv3x3_amx_grid_block(const conv3x3_amx_grid *g, const uint32_t *a, const uint32_t *const *src, size_t nb,
                            size_t nv, bool wide, float *stage, bool from_stage) {
    (void)g, (void)a, (void)src, (void)nb, (void)nv, (void)wide, (void)stage, (void)from_stage;
}
void conv3x3_amx_dw_block(const uint32_t *d, size_t d_stride, const uint32_t *const *tap, size_t nj, float *acc) {
    (void)d, (void)d_stride, (void)tap, (void)nj, (void)acc;
}
#endif
