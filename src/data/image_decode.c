/* PNG or JPEG by content (image_decode.h): the decoders' own headers and callbacks adapted to one. */
#define _POSIX_C_SOURCE 200809L

#include "data/image_decode.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/escape.h"
#include "data/jpeg_read.h"
#include "data/png_read.h"

typedef struct adapter {
    image_pixels_fn fn;
    void *ctx;
    image_header *h;
} adapter;

static snug_status from_png(void *ctx, const uint8_t *pixels, const png_header *ph, snug_error *err) {
    adapter *a = ctx;
    *a->h = (image_header){ph->height, ph->width, ph->channels, png_decode_bytes(ph)};
    return a->fn ? a->fn(a->ctx, pixels, a->h, err) : SNUG_OK;
}

static snug_status from_jpeg(void *ctx, const uint8_t *pixels, const jpeg_header *jh, snug_error *err) {
    adapter *a = ctx;
    *a->h = (image_header){jh->height, jh->width, jh->channels, jpeg_decode_bytes(jh)};
    return a->fn ? a->fn(a->ctx, pixels, a->h, err) : SNUG_OK;
}

/* Whether the file starts as a JPEG does (FF D8 FF) or, when it starts as neither a JPEG nor a PNG, whether its
 * name ends in .jpg or .jpeg. A file that cannot be read goes to the PNG decoder, which says why. */
static bool is_jpeg(const char *path) {
    static const unsigned char png_sig[4] = {0x89, 'P', 'N', 'G'};
    unsigned char head[4] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    const size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF) return true;
    if (got == sizeof head && memcmp(head, png_sig, sizeof head) == 0) return false;
    const char *dot = strrchr(path, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

snug_status image_decode(const char *path, image_header *h, image_pixels_fn fn, void *ctx, snug_error *err) {
    /* Checked before any open: opening a FIFO named like an image would wait for a writer forever. */
    struct stat st;
    if (stat(path, &st) != 0)
        return snug_fail(err, SNUG_E_IO, "cannot open %s: %s", escape_text(path).text, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return snug_fail(err, SNUG_E_IO, "%s is not a regular file (a folder, a pipe or a device), expected an "
                         "image", escape_text(path).text);
    adapter a = {fn, ctx, h};
    if (is_jpeg(path)) {
        jpeg_header jh;
        return jpeg_decode(path, &jh, from_jpeg, &a, err);
    }
    png_header ph;
    return png_decode(path, PNG_AS_IMAGE, NULL, &ph, from_png, &a, err);
}

snug_status image_read_size(const char *path, image_header *h, snug_error *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return snug_fail(err, SNUG_E_IO, "cannot open %s: %s", escape_text(path).text, strerror(errno));
    if (!S_ISREG(st.st_mode)) /* a FIFO would wait for a writer forever; image_decode says what it is */
        return image_decode(path, h, NULL, NULL, err);
    if (is_jpeg(path)) {
        jpeg_header jh;
        snug_status s = jpeg_read_size(path, &jh, err);
        if (s == SNUG_OK) *h = (image_header){jh.height, jh.width, jh.channels, jpeg_decode_bytes(&jh)};
        return s;
    }
    /* png_decode stops at the header when the size differs from the one expected, with the header's size in
     * ph: no image is SIZE_MAX pixels high, so nothing is decoded; any other failure is the file's */
    const png_header never = {SIZE_MAX, SIZE_MAX, 0};
    png_header ph = {0};
    snug_error shape = {0};
    snug_status s = png_decode(path, PNG_AS_IMAGE, &never, &ph, NULL, NULL, &shape);
    if (s != SNUG_E_SHAPE) {
        if (err) *err = shape;
        return s == SNUG_OK ? snug_fail(err, SNUG_E_FORMAT, "%s: no size in its header", escape_text(path).text) : s;
    }
    *h = (image_header){ph.height, ph.width, ph.channels, png_decode_bytes(&ph)};
    return SNUG_OK;
}
