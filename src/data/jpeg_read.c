/* libjpeg behind a status: every libjpeg call runs inside decode_guarded, the one function that calls setjmp,
 * and all state that must survive a longjmp lives in a jpeg_reader owned by the caller (so no local of the
 * setjmp frame is read after the jump). libjpeg's own text is kept and appended to a message that names the
 * file; nothing is printed. */
#define _POSIX_C_SOURCE 200809L

#include "data/jpeg_read.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/escape.h"

typedef struct jpeg_reader {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    jmp_buf jump;
    const char *path;
    escaped shown;          /* path in messages: a file name may hold escape codes */
    FILE *file;
    uint8_t *pixels;        /* (height, width, channels) */
    jpeg_header header;
    snug_status status;     /* a failure found by our own checks (the message is in err) */
    bool damaged;           /* libjpeg warned that the pixels are partly invented */
    bool header_only;       /* jpeg_read_size: the header read and checked, nothing allocated or decoded */
    char libjpeg_message[JMSG_LENGTH_MAX];
} jpeg_reader;

static void on_error(j_common_ptr c) {
    jpeg_reader *r = c->client_data;
    c->err->format_message(c, r->libjpeg_message);
    longjmp(r->jump, 1);
}

/* The warnings after which libjpeg goes on with made-up data (gray blocks for a cut file, garbage after a bad
 * code): the file is refused. Other warnings (stray bytes between markers, an odd JFIF version) leave the
 * pixels right. Trace messages (level >= 0) are ignored. */
static void on_message(j_common_ptr c, int level) {
    if (level >= 0) return;
    const int code = c->err->msg_code;
    if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
        code == JWRN_MUST_RESYNC || code == JWRN_NOT_SEQUENTIAL) {
        jpeg_reader *r = c->client_data;
        r->damaged = true;
        c->err->format_message(c, r->libjpeg_message);
        longjmp(r->jump, 1);
    }
}

static void on_output(j_common_ptr c) { (void)c; }

/* The output colour space for the file's: gray stays gray, YCbCr and RGB become RGB, ink is refused. */
static bool choose_output(jpeg_reader *r, snug_error *err) {
    switch (r->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: r->cinfo.out_color_space = JCS_GRAYSCALE; return true;
    case JCS_YCbCr: case JCS_RGB: r->cinfo.out_color_space = JCS_RGB; return true;
    case JCS_CMYK: case JCS_YCCK:
        r->status = snug_fail(err, SNUG_E_FORMAT, "%s is a CMYK JPEG (print colours), which snug does not convert: "
                              "save it as RGB (e.g. convert %s -colorspace sRGB out.jpg)", r->shown.text,
                              r->shown.text);
        return false;
    default:
        r->status = snug_fail(err, SNUG_E_FORMAT, "%s is a JPEG of %d components in a colour space snug does not "
                              "know: save it as RGB or grayscale", r->shown.text, r->cinfo.num_components);
        return false;
    }
}

/* The header's size against the bound, before anything is allocated. */
static bool read_header(jpeg_reader *r, snug_error *err) {
    jpeg_read_header(&r->cinfo, TRUE);
    if (!choose_output(r, err)) return false;
    jpeg_calc_output_dimensions(&r->cinfo);
    jpeg_header *h = &r->header;
    h->height = r->cinfo.output_height;
    h->width = r->cinfo.output_width;
    h->channels = (size_t)r->cinfo.output_components;
    h->progressive = r->cinfo.progressive_mode != 0;
    size_t pixels, total;
    if (!size_mul(h->height, h->width, &pixels) || pixels > JPEG_MAX_PIXELS) {
        r->status = snug_fail(err, SNUG_E_FORMAT, "%s declares %zu x %zu pixels, more than the %zu Mi pixels (e.g. "
                              "8192 x 8192) one image may have: refused before decoding (resize the image)",
                              r->path, h->height, h->width, JPEG_MAX_PIXELS >> 20);
        return false;
    }
    if (!size_mul(pixels, h->channels, &total) || total == 0 || total > JPEG_MAX_DECODED_BYTES) {
        r->status = snug_fail(err, SNUG_E_FORMAT, "%s declares %zu x %zu pixels with %zu channel(s), more than "
                              "the %zu MiB one image may decode to: refused before decoding (resize the image)",
                              r->shown.text, h->height, h->width, h->channels, JPEG_MAX_DECODED_BYTES >> 20);
        return false;
    }
    if (r->header_only) return true;
    r->pixels = malloc(total);
    if (!r->pixels) {
        r->status = snug_fail(err, SNUG_E_OOM, "%s: out of host memory for %zu bytes of decoded pixels", r->shown.text,
                              total);
        return false;
    }
    return true;
}

/* Every libjpeg call; false on any failure (a longjmp from libjpeg, or our own check). */
static bool decode_guarded(jpeg_reader *r, snug_error *err) {
    if (setjmp(r->jump)) return false;
    jpeg_create_decompress(&r->cinfo);
    r->cinfo.mem->max_memory_to_use = (long)JPEG_MAX_DECODER_MEMORY;
    jpeg_stdio_src(&r->cinfo, r->file);
    if (!read_header(r, err)) return false;
    if (r->header_only) return true;
    jpeg_start_decompress(&r->cinfo);
    const size_t row_bytes = r->header.width * r->header.channels;
    while (r->cinfo.output_scanline < r->cinfo.output_height) {
        JSAMPROW row = r->pixels + (size_t)r->cinfo.output_scanline * row_bytes;
        jpeg_read_scanlines(&r->cinfo, &row, 1);
    }
    jpeg_finish_decompress(&r->cinfo);  /* reads to the end marker, so a cut file fails here at the latest */
    return true;
}

/* Opens path and checks the start-of-image marker, so that "not a JPEG" is said plainly rather than by libjpeg. */
static snug_status open_jpeg(jpeg_reader *r, snug_error *err) {
    r->file = fopen(r->path, "rb");
    if (!r->file) return snug_fail(err, SNUG_E_IO, "cannot open %s: %s", r->shown.text, strerror(errno));
    struct stat st;
    if (fstat(fileno(r->file), &st) != 0 || !S_ISREG(st.st_mode))
        return snug_fail(err, SNUG_E_IO, "%s is not a regular file, expected a JPEG", r->shown.text);
    unsigned char soi[2];
    size_t got = fread(soi, 1, sizeof soi, r->file);
    if (got != sizeof soi || soi[0] != 0xFF || soi[1] != 0xD8)
        return snug_fail(err, SNUG_E_FORMAT, "%s is not a JPEG file (%s)", r->shown.text,
                         got < sizeof soi ? "shorter than the 2-byte start marker" : "no start-of-image marker");
    if (fseek(r->file, 0, SEEK_SET) != 0)
        return snug_fail(err, SNUG_E_IO, "cannot read %s: %s", r->shown.text, strerror(errno));
    r->cinfo.err = jpeg_std_error(&r->jerr);
    r->jerr.error_exit = on_error;
    r->jerr.emit_message = on_message;
    r->jerr.output_message = on_output;
    r->cinfo.client_data = r;  /* jpeg_create_decompress keeps err and client_data */
    return SNUG_OK;
}

static void close_jpeg(jpeg_reader *r) {
    if (r->cinfo.err) jpeg_destroy_decompress(&r->cinfo);  /* nothing when creating it failed */
    if (r->file) fclose(r->file);
    free(r->pixels);
}

static snug_status read_jpeg(const char *path, bool header_only, jpeg_header *h, jpeg_pixels_fn fn, void *ctx,
                             snug_error *err) {
    jpeg_reader *r = calloc(1, sizeof *r);  /* libjpeg's structures are a few KiB: off the caller's stack */
    if (!r) return snug_fail(err, SNUG_E_OOM, "%s: out of host memory for the JPEG decoder",
                                 escape_text(path).text);
    r->header_only = header_only;
    r->path = path;
    r->shown = escape_text(path);
    r->status = SNUG_OK;
    snug_status s = open_jpeg(r, err);
    if (s == SNUG_OK && !decode_guarded(r, err))
        s = r->status != SNUG_OK ? r->status
            : snug_fail(err, SNUG_E_FORMAT, "%s: %s JPEG: %s (replace or remove the file)", r->shown.text,
                        r->damaged ? "truncated or damaged" : "corrupt", r->libjpeg_message);
    if (s == SNUG_OK) *h = r->header;
    if (s == SNUG_OK && fn) s = fn(ctx, r->pixels, &r->header, err);
    close_jpeg(r);
    free(r);
    return s;
}

snug_status jpeg_decode(const char *path, jpeg_header *h, jpeg_pixels_fn fn, void *ctx, snug_error *err) {
    return read_jpeg(path, false, h, fn, ctx, err);
}

snug_status jpeg_read_size(const char *path, jpeg_header *h, snug_error *err) {
    return read_jpeg(path, true, h, NULL, NULL, err);
}

size_t jpeg_decode_bytes(const jpeg_header *h) {
    /* sizes of an image that was decoded once already: no product overflows. A baseline decode keeps a few
     * rows of 16 pixels (an MCU row, before and after upsampling); a progressive one every coefficient. */
    size_t bytes = h->height * h->width * h->channels + 4 * 16 * h->width * 3 + JPEG_DECODER_BYTES;
    if (h->progressive) bytes += 2 * 3 * (h->height + 16) * (h->width + 16);
    return bytes;
}
