/* What the AMX kernels (bgemm_amx.c, conv3x3_amx.c) share: the tile configuration, its memory layout (palette
 * 1: bytes per row and rows of each of the 16 tiles) and its loading on the calling thread. Only for code
 * compiled where AMX_TILES_BUILD says the compiler can, and called where kernel_isa_now() reaches
 * KERNEL_ISA_AMX_BF16. */
#ifndef SNUG_KERNELS_AMX_TILES_H
#define SNUG_KERNELS_AMX_TILES_H

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define AMX_TILES_BUILD 1

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define AMX __attribute__((target("amx-tile,amx-bf16")))

typedef struct amx_tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tile_config;

/* An empty palette-1 configuration: every tile unused until amx_tile_shape gives it rows. */
static inline void amx_tile_config_init(amx_tile_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
}

static inline void amx_tile_shape(amx_tile_config *cfg, int tile, size_t rows, size_t bytes) {
    cfg->rows[tile] = (uint8_t)rows;
    cfg->colsb[tile] = (uint16_t)bytes;
}

/* GCC 12's _tile_loadconfig names only the first 8 bytes as read, so the stores to the rows and columns are
 * dropped as dead and ldtilecfg faults: the whole configuration is the operand here. */
static inline AMX void amx_tile_config_load(const amx_tile_config *cfg) {
    __asm__ volatile("ldtilecfg %0" ::"m"(*cfg));
}

/* Tiles 0-7 all 16 rows of 64 bytes (16 floats, or 16 pair words). */
static inline AMX void amx_tile_config_load_square(void) {
    amx_tile_config cfg;
    amx_tile_config_init(&cfg);
    for (int t = 0; t < 8; t++) amx_tile_shape(&cfg, t, 16, 64);
    amx_tile_config_load(&cfg);
}
#endif

#endif
