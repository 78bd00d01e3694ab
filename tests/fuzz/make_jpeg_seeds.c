/* Writes the valid JPEG files the jpeg corpus starts from, with libjpeg: tiny images of every kind the decoder
 * takes apart differently (baseline and progressive, gray and RGB, chroma subsampled or not, restart markers,
 * optimised and arithmetic entropy coding, sizes that are not whole blocks) and a CMYK one the reader refuses.
 * tests/fuzz/make_corpus.py runs it and derives the broken variants.
 *   usage: fuzz_make_jpeg_seeds DIR */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>  /* before jpeglib.h, which uses FILE */
#include <stdlib.h>

#include <jpeglib.h>

typedef struct jpeg_seed {
    const char *name;
    int height, width, components; /* components 1 gray, 3 RGB, 4 CMYK */
    int quality;
    bool progressive, full_chroma, optimise, arithmetic;
    unsigned restart_rows;         /* a restart marker every so many MCU rows; 0 none */
} jpeg_seed;

static const jpeg_seed seeds[] = {
    {"rgb-8x8", 8, 8, 3, 75, false, false, false, false, 0},
    {"gray-8x8", 8, 8, 1, 90, false, false, false, false, 0},
    {"rgb-progressive-16x16", 16, 16, 3, 75, true, false, false, false, 0},
    {"gray-progressive-9x13", 9, 13, 1, 80, true, false, false, false, 0},
    {"rgb-444-restart-17x9", 17, 9, 3, 95, false, true, false, false, 1},
    {"rgb-optimised-24x5", 24, 5, 3, 50, false, false, true, false, 0},
    {"rgb-arithmetic-8x16", 8, 16, 3, 75, false, false, false, true, 0},
    {"gray-1x1", 1, 1, 1, 100, false, false, false, false, 0},
    {"cmyk-8x8", 8, 8, 4, 75, false, false, false, false, 0},
};

/* Smooth gradients with some detail, so that every block has AC coefficients to code. */
static uint8_t sample_value(int y, int x, int c) { return (uint8_t)(x * 29 + y * 17 + c * 71 + ((x ^ y) & 3) * 40); }

static int write_seed(const char *dir, const jpeg_seed *s) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.jpg", dir, s->name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);  /* errors exit the program: a seed writer has nothing to recover */
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_height = (JDIMENSION)s->height;
    c.image_width = (JDIMENSION)s->width;
    c.input_components = s->components;
    c.in_color_space = s->components == 1 ? JCS_GRAYSCALE : s->components == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, s->quality, TRUE);
    if (s->progressive) jpeg_simple_progression(&c);
    if (s->full_chroma) c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 1;
    c.optimize_coding = s->optimise;
    c.arith_code = s->arithmetic;
    c.restart_in_rows = (int)s->restart_rows;
    jpeg_start_compress(&c, TRUE);
    uint8_t row[64 * 4];
    for (int y = 0; y < s->height; y++) {
        for (int x = 0; x < s->width; x++)
            for (int k = 0; k < s->components; k++) row[x * s->components + k] = sample_value(y, x, k);
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return fclose(f) != 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    int failed = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) failed |= write_seed(argv[1], &seeds[i]);
    return failed;
}
