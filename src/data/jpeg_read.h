/* Decoding one JPEG file with libjpeg (libjpeg-turbo's libjpeg API), its errors turned into a snug_status that
 * names the file, in the shape of png_read.h. libjpeg reports errors by calling a handler that must not return
 * (here it longjmps) and prints warnings to stderr by default: neither leaks out of jpeg_read.c. Delivered as
 * 8-bit gray (1 channel) for a grayscale file, 8-bit RGB (3 channels) for a YCbCr or RGB one; CMYK and YCCK
 * files (Adobe print JPEGs) are refused, since converting ink to light needs the file's colour profile. */
#ifndef SNUG_DATA_JPEG_READ_H
#define SNUG_DATA_JPEG_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snug.h"

/* The most bytes one decoded image may take: the bound of png_read.h, for the same reason (a header of a few
 * bytes can declare gigabytes of pixels), checked before anything is decoded. */
#define JPEG_MAX_DECODED_BYTES ((size_t)1 << 28)
/* The most pixels one image may declare (64 Mi, 8192 x 8192), checked from the header first: a gray image
 * passes the byte bound at three times the pixels of an RGB one, and a progressive decode holds 2 bytes of
 * coefficients per sample besides, so the byte bound alone lets a 12000 x 12000 gray header of a few hundred
 * bytes have 137 MiB of pixels and, progressive, 275 MiB of coefficients allocated before its missing data is
 * noticed. */
#define JPEG_MAX_PIXELS ((size_t)1 << 26)
/* libjpeg's max_memory_to_use, which bounds its coefficient arrays: a progressive file keeps every DCT coefficient
 * (2 bytes per sample and component) until its last scan, about twice the decoded RGB pixels of an image at the
 * bound. */
#define JPEG_MAX_DECODER_MEMORY ((size_t)3 << 28)
/* libjpeg's structures and a baseline decode's working rows beyond 16 rows of the image (measured in KiB). */
#define JPEG_DECODER_BYTES ((size_t)256 << 10)

typedef struct jpeg_header {
    size_t height, width;
    size_t channels;   /* as delivered: 1 or 3 */
    bool progressive;  /* decoded from all of its coefficients at once (see jpeg_decode_bytes) */
} jpeg_header;

/* Receives the decoded pixels, (height, width, channels) bytes interleaved; a status other than SNUG_OK (with
 * err filled) rejects them, and jpeg_decode returns it. */
typedef snug_status (*jpeg_pixels_fn)(void *ctx, const uint8_t *pixels, const jpeg_header *h, snug_error *err);

/* Decodes the whole file at path into a temporary buffer, fills *h and calls fn (when not NULL) once with the
 * pixels. The header is read and checked first, before any pixel is decoded: the declared pixels must not pass
 * JPEG_MAX_PIXELS, nor the decoded bytes JPEG_MAX_DECODED_BYTES. A file whose entropy-coded data is cut short or damaged (libjpeg's "premature end",
 * "bad Huffman code", "must resync" warnings: the pixels it would give are partly invented) is refused, not
 * delivered. Fails with SNUG_E_IO (cannot open or read, not a regular file), SNUG_E_FORMAT (not a JPEG,
 * corrupt, truncated, CMYK, larger than the bound) or SNUG_E_OOM; the message names path. */
snug_status jpeg_decode(const char *path, jpeg_header *h, jpeg_pixels_fn fn, void *ctx, snug_error *err);

/* jpeg_decode's header part alone: *h filled from the start of frame (jpeg_read_header) and checked against the
 * same bounds, no pixel allocated or decoded; its failures as jpeg_decode's. */
snug_status jpeg_read_size(const char *path, jpeg_header *h, snug_error *err);
/* What one jpeg_decode of an image of h's size holds at most: the decoded pixels, libjpeg's working rows and
 * structures, and for a progressive file its coefficient arrays. */
size_t jpeg_decode_bytes(const jpeg_header *h);

#endif
