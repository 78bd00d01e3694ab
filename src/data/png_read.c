/* libpng behind a status: every libpng call runs inside decode_guarded, the one function that calls setjmp, and
 * all state that must survive a longjmp lives in a png_reader owned by the caller (so no local of the setjmp
 * frame is read after the jump). libpng's error text is kept and appended to a message that names the file. */
#define _POSIX_C_SOURCE 200809L

#include "data/png_read.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/escape.h"

typedef struct png_reader {
    const char *path;
    escaped shown;          /* path in messages: a file name may hold escape codes */
    png_purpose purpose;
    const png_header *want; /* the size the caller expects, or NULL */
    FILE *file;
    png_structp png;
    png_infop info;
    uint8_t *pixels;        /* (height, width, channels) */
    png_bytep *rows;        /* (height) pointers into pixels */
    png_header header;
    snug_status status;     /* a failure found by our own checks (the message is in err) */
    char libpng_message[256];
} png_reader;

static void on_error(png_structp png, png_const_charp message) {
    png_reader *r = png_get_error_ptr(png);
    snprintf(r->libpng_message, sizeof r->libpng_message, "%s", message);
    png_longjmp(png, 1);
}

/* Warnings (an odd colour profile, a bad ancillary chunk) do not make the pixels wrong. */
static void on_warning(png_structp png, png_const_charp message) {
    (void)png;
    (void)message;
}

static const char *color_name(int color_type) {
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: return "grayscale";
    case PNG_COLOR_TYPE_GRAY_ALPHA: return "grayscale+alpha";
    case PNG_COLOR_TYPE_RGB: return "RGB";
    case PNG_COLOR_TYPE_RGB_ALPHA: return "RGBA";
    case PNG_COLOR_TYPE_PALETTE: return "palette";
    default: return "unknown";
    }
}

/* Sets the transforms that deliver the purpose's pixel format; false (and r->status) when the file has a
 * format the purpose does not accept. */
static bool set_transforms(png_reader *r, int color_type, int bit_depth, snug_error *err) {
    if (r->purpose == PNG_AS_MASK) {
        if (bit_depth == 8 && (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_PALETTE))
            return true;
        r->status = snug_fail(err, SNUG_E_FORMAT, "%s: a mask must be an 8-bit grayscale or palette PNG whose "
                              "values are class indices, this one is %d-bit %s", r->shown.text, bit_depth,
                              color_name(color_type));
        return false;
    }
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r->png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(r->png);
    if (bit_depth == 16) png_set_scale_16(r->png);
    if (color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(r->png);
    return true;
}

/* The header's size against the caller's and against the bound, before anything is allocated: a few kilobytes
 * of zlib can declare gigabytes of pixels. total: the decoded bytes, or 0 when they overflow size_t. */
static bool size_acceptable(png_reader *r, size_t total, snug_error *err) {
    const png_header *h = &r->header, *want = r->want;
    if (want && (h->height != want->height || h->width != want->width ||
                 (want->channels && h->channels != want->channels))) {
        r->status = snug_fail(err, SNUG_E_SHAPE, "%s is %zu x %zu with %zu channel(s), expected %zu x %zu with "
                              "%zu", r->shown.text, h->height, h->width, h->channels, want->height, want->width,
                              want->channels ? want->channels : h->channels);
        return false;
    }
    if (total == 0 || total > PNG_MAX_DECODED_BYTES) {
        r->status = snug_fail(err, SNUG_E_FORMAT, "%s declares %zu x %zu pixels with %zu channel(s), more than "
                              "the %zu MiB one image may decode to: refused before decoding (resize the image)",
                              r->shown.text, h->height, h->width, h->channels, PNG_MAX_DECODED_BYTES >> 20);
        return false;
    }
    return true;
}

/* Reads the header, checks it against the purpose and the expected size, and sizes the pixel buffer. */
static bool read_header(png_reader *r, snug_error *err) {
    png_read_info(r->png, r->info);
    const int color_type = png_get_color_type(r->png, r->info), bit_depth = png_get_bit_depth(r->png, r->info);
    if (!set_transforms(r, color_type, bit_depth, err)) return false;
    png_set_interlace_handling(r->png);  /* png_read_image then runs every pass */
    png_read_update_info(r->png, r->info);
    r->header.height = png_get_image_height(r->png, r->info);
    r->header.width = png_get_image_width(r->png, r->info);
    r->header.channels = png_get_channels(r->png, r->info);
    size_t row_bytes, total;
    if (!size_mul(r->header.width, r->header.channels, &row_bytes) ||
        !size_mul(row_bytes, r->header.height, &total) || row_bytes != png_get_rowbytes(r->png, r->info))
        total = 0;
    if (!size_acceptable(r, total, err)) return false;
    r->pixels = malloc(total);
    r->rows = malloc(r->header.height * sizeof *r->rows);
    if (!r->pixels || !r->rows) {
        r->status = snug_fail(err, SNUG_E_OOM, "%s: out of host memory for %zu bytes of decoded pixels", r->shown.text,
                              total);
        return false;
    }
    for (size_t y = 0; y < r->header.height; y++) r->rows[y] = r->pixels + y * row_bytes;
    return true;
}

/* Every libpng call; false on any failure (a longjmp from libpng, or our own check). */
static bool decode_guarded(png_reader *r, snug_error *err) {
    if (setjmp(png_jmpbuf(r->png))) return false;
    png_init_io(r->png, r->file);
    if (!read_header(r, err)) return false;
    png_read_image(r->png, r->rows);
    png_read_end(r->png, NULL);  /* the chunks after the pixels, so a truncated file fails here */
    return true;
}

/* Opens path and checks the signature, so that "not a PNG" is said plainly rather than by libpng. */
static snug_status open_png(png_reader *r, snug_error *err) {
    r->file = fopen(r->path, "rb");
    if (!r->file) return snug_fail(err, SNUG_E_IO, "cannot open %s: %s", r->shown.text, strerror(errno));
    struct stat st;
    if (fstat(fileno(r->file), &st) != 0 || !S_ISREG(st.st_mode))
        return snug_fail(err, SNUG_E_IO, "%s is not a regular file, expected a PNG", r->shown.text);
    png_byte signature[8];
    size_t got = fread(signature, 1, sizeof signature, r->file);
    if (got != sizeof signature || png_sig_cmp(signature, 0, sizeof signature) != 0)
        return snug_fail(err, SNUG_E_FORMAT, "%s is not a PNG file (%s)", r->shown.text,
                         got < sizeof signature ? "shorter than the 8-byte PNG signature" : "bad signature");
    r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, on_error, on_warning);
    if (r->png) r->info = png_create_info_struct(r->png);
    if (!r->png || !r->info) return snug_fail(err, SNUG_E_OOM, "%s: out of host memory for libpng", r->shown.text);
    png_set_sig_bytes(r->png, sizeof signature);
    /* libpng allocates (and clears) a text or profile chunk's declared length before it reads it: a 247-byte
     * file whose zTXt chunk declared 2 GB took 2 GB and seconds. Pixels need none of these chunks: they are
     * skipped unread (CRC-checked in small pieces), and any other ancillary chunk may take at most
     * PNG_CHUNK_MAX_BYTES. */
    static const png_byte skipped[] = "zTXt\0tEXt\0iTXt\0iCCP\0sPLT\0eXIf\0";
    png_set_keep_unknown_chunks(r->png, PNG_HANDLE_CHUNK_NEVER, skipped, (int)(sizeof skipped / 5));
    png_set_chunk_malloc_max(r->png, PNG_CHUNK_MAX_BYTES);
    return SNUG_OK;
}

static void close_png(png_reader *r) {
    if (r->png) png_destroy_read_struct(&r->png, r->info ? &r->info : NULL, NULL);
    if (r->file) fclose(r->file);
    free(r->rows);
    free(r->pixels);
}

snug_status png_decode(const char *path, png_purpose purpose, const png_header *want, png_header *h,
                       png_pixels_fn fn, void *ctx, snug_error *err) {
    png_reader r = {.path = path, .shown = escape_text(path), .purpose = purpose, .want = want, .status = SNUG_OK};
    snug_status s = open_png(&r, err);
    if (s == SNUG_OK && !decode_guarded(&r, err))
        s = r.status != SNUG_OK ? r.status
                                : snug_fail(err, SNUG_E_FORMAT, "%s: corrupt PNG: %s", r.shown.text, r.libpng_message);
    if (s == SNUG_OK || s == SNUG_E_SHAPE) *h = r.header;
    if (s == SNUG_OK && fn) s = fn(ctx, r.pixels, &r.header, err);
    close_png(&r);
    return s;
}

size_t png_decode_bytes(const png_header *h) {
    /* sizes of an image that was decoded once already: no product overflows */
    return h->height * h->width * h->channels + h->height * sizeof(png_bytep) + PNG_DECODER_BYTES;
}
