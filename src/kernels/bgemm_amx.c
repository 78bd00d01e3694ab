/* bgemm's AMX tile (bgemm_amx.h). The tile code is compiled through a function attribute (the build has no
 * -march) and called only where kernel_isa_now() reaches KERNEL_ISA_AMX_BF16. Tiles 0-3 hold C (rows 0-15 and
 * 16-31 by columns 0-15 and 16-31), 4-5 the two A row blocks, 6-7 the panel's two column halves: every tile is
 * 16 rows of 64 bytes, one configuration for every call. A's tiles are loaded with the streaming hint
 * (tileloaddt1): bgemm runs every row block against one panel's chunk before the next chunk, so the panel is
 * read again by the next call and A's tiles are not; A kept out of L1 leaves the panel there. */
#include "kernels/bgemm_amx.h"

#include <stdbool.h>
#include <string.h>

#include "kernels/amx_tiles.h"

#ifdef AMX_TILES_BUILD
AMX void bgemm_amx_begin(void) { amx_tile_config_load_square(); }

AMX void bgemm_amx_end(void) { _tile_release(); }

/* A 16 x 16 staging block of C for a tile that C does not fill (its last rows or columns) or that starts from
 * the biases: the rows and columns C lacks are zero, and only C's part is copied back. */
typedef struct staged {
    float v[16 * 16];
} staged;

static void stage_in(staged *s, const float *c, size_t ldc, size_t vr, size_t vc, int start, const float *bias) {
    memset(s->v, 0, sizeof s->v);
    for (size_t i = 0; i < vr; i++)
        if (start == BGEMM_AMX_C) memcpy(s->v + 16 * i, c + i * ldc, vc * sizeof *c);
        else if (start == BGEMM_AMX_BIAS) memcpy(s->v + 16 * i, bias, vc * sizeof *bias);
}

static void stage_out(const staged *s, float *c, size_t ldc, size_t vr, size_t vc) {
    for (size_t i = 0; i < vr; i++) memcpy(c + i * ldc, s->v + 16 * i, vc * sizeof *c);
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Tile T (C's tile at row block R, column block K) started: straight from C where it fills the tile, else from
 * its staging block. Tile numbers must be constants in the instructions, hence a macro. */
#define C_IN(T, R, K)                                                                                         \
    if (R * 16 < mr && K * 16 < nr) {                                                                         \
        const size_t vr = min_size(16, mr - R * 16), vc = min_size(16, nr - K * 16);                          \
        const float *ct = cin + R * 16 * ldcin + K * 16;                                                      \
        whole[T] = vr == 16 && vc == 16;                                                                      \
        if (start == BGEMM_AMX_ZERO) _tile_zero(T);                                                           \
        else if (whole[T] && start == BGEMM_AMX_C) _tile_loadd(T, ct, (long)(ldcin * sizeof *cin));          \
        else {                                                                                                \
            stage_in(&st[T], ct, ldcin, vr, vc, start, bias ? bias + K * 16 : NULL);                         \
            _tile_loadd(T, st[T].v, 64);                                                                      \
        }                                                                                                     \
    }
#define C_OUT(T, R, K)                                                                                        \
    if (R * 16 < mr && K * 16 < nr) {                                                                         \
        const size_t vr = min_size(16, mr - R * 16), vc = min_size(16, nr - K * 16);                          \
        float *ct = c + R * 16 * ldc + K * 16;                                                                \
        if (whole[T]) _tile_stored(T, ct, (long)(ldc * sizeof *c));                                           \
        else {                                                                                                \
            _tile_stored(T, st[T].v, 64);                                                                     \
            stage_out(&st[T], ct, ldc, vr, vc);                                                               \
        }                                                                                                     \
    }

AMX void bgemm_amx_block(size_t kp, const bgemm_amx_a *ap, const uint32_t *b, const float *cin, size_t ldcin,
                         float *c, size_t ldc, size_t mr, size_t nr, int start, const float *bias) {
    staged st[4];
    bool whole[4] = {false, false, false, false};
    C_IN(0, 0, 0)
    C_IN(1, 0, 1)
    C_IN(2, 1, 0)
    C_IN(3, 1, 1)
    const bgemm_amx_a a = *ap;
    const long sa = (long)a.row_bytes, sb = 32 * (long)sizeof *b;
    const char *a0 = a.p, *a1 = mr > 16 ? a.p + a.block_bytes : a.p; /* rows past mr are never read */
    const size_t ta = a.tile_bytes;
    if (mr > 16 && nr > 16)
        for (size_t q = 0, t = 0; q < kp; q += BGEMM_AMX_PAIRS, t += ta) {
            _tile_stream_loadd(4, a0 + t, sa);
            _tile_loadd(6, b + q * 32, sb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(7, b + q * 32 + 16, sb);
            _tile_dpbf16ps(1, 4, 7);
            _tile_stream_loadd(5, a1 + t, sa);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    else if (nr > 16)
        for (size_t q = 0, t = 0; q < kp; q += BGEMM_AMX_PAIRS, t += ta) {
            _tile_stream_loadd(4, a0 + t, sa);
            _tile_loadd(6, b + q * 32, sb);
            _tile_loadd(7, b + q * 32 + 16, sb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
        }
    else if (mr > 16)
        for (size_t q = 0, t = 0; q < kp; q += BGEMM_AMX_PAIRS, t += ta) {
            _tile_stream_loadd(4, a0 + t, sa);
            _tile_loadd(6, b + q * 32, sb);
            _tile_stream_loadd(5, a1 + t, sa);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(2, 5, 6);
        }
    else
        for (size_t q = 0, t = 0; q < kp; q += BGEMM_AMX_PAIRS, t += ta) {
            _tile_stream_loadd(4, a0 + t, sa);
            _tile_loadd(6, b + q * 32, sb);
            _tile_dpbf16ps(0, 4, 6);
        }
    C_OUT(0, 0, 0)
    C_OUT(1, 0, 1)
    C_OUT(2, 1, 0)
    C_OUT(3, 1, 1)
}
#else
void bgemm_amx_begin(void) {}
void bgemm_amx_end(void) {}
void bgemm_amx_block(size_t kp, const bgemm_amx_a *ap, const uint32_t *b, const float *cin, size_t ldcin,
                     float *c, size_t ldc, size_t mr, size_t nr, int start, const float *bias) {
    (void)kp, (void)ap, (void)b, (void)cin, (void)ldcin, (void)c, (void)ldc, (void)mr, (void)nr, (void)start;
    (void)bias;
}
#endif
