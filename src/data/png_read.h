/* Decoding one PNG file with libpng, its errors turned into a snug_status that names the file (libpng reports
 * errors by longjmp; nothing of that leaks out of png_read.c). Two readings of a file:
 *   PNG_AS_IMAGE: any PNG, delivered as 8-bit gray (1 channel) or 8-bit RGB (3 channels): gray of 1, 2, 4 or
 *                 16 bits is scaled to 8 bits, a palette is expanded to RGB, an alpha channel is dropped;
 *   PNG_AS_MASK:  an 8-bit grayscale or 8-bit palette PNG, delivered as its raw values (palette indices are not
 *                 expanded: a palette mask, as in Pascal VOC, holds class indices), 1 channel. */
#ifndef SNUG_DATA_PNG_READ_H
#define SNUG_DATA_PNG_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snug.h"

typedef enum png_purpose { PNG_AS_IMAGE = 0, PNG_AS_MASK } png_purpose;

/* The most bytes one decoded image may take (256 MiB: an 8-bit RGB image of about 9400 x 9400 pixels). A PNG's
 * header declares its size and a few kilobytes of zlib can declare gigabytes, so the size is checked against
 * this bound (and against the size the caller expects) before anything is allocated or decoded. */
#define PNG_MAX_DECODED_BYTES ((size_t)1 << 28)
/* The most an ancillary chunk (text, colour profile) may take when read; larger ones make the file corrupt. */
#define PNG_CHUNK_MAX_BYTES ((size_t)1 << 22)

typedef struct png_header {
    size_t height, width;
    size_t channels;  /* as delivered: 1 or 3 */
} png_header;

/* Receives the decoded pixels, (height, width, channels) bytes interleaved; a status other than SNUG_OK (with
 * err filled) rejects them, and png_decode returns it. */
typedef snug_status (*png_pixels_fn)(void *ctx, const uint8_t *pixels, const png_header *h, snug_error *err);

/* Decodes the whole file at path (every chunk, CRCs checked) into a temporary buffer, fills *h and calls fn
 * (when not NULL) once with the pixels. The header is checked first, before any pixel is decoded: want (when not
 * NULL) is the size the caller expects (height and width, and channels when not 0), and the decoded bytes must
 * not pass PNG_MAX_DECODED_BYTES. Fails with SNUG_E_SHAPE (*h filled from the header) when the size is not
 * want's, SNUG_E_IO (cannot open or read), SNUG_E_FORMAT (not a PNG, corrupt, larger than the bound, or a kind
 * the purpose does not accept) or SNUG_E_OOM; the message names path and, for a size, the dimensions. */
snug_status png_decode(const char *path, png_purpose purpose, const png_header *want, png_header *h,
                       png_pixels_fn fn, void *ctx, snug_error *err);

/* What one png_decode of an image of h's size holds at most: the decoded pixels and their row pointers, and a
 * bound on libpng's and zlib's state and the FILE's buffer (a few KiB of structures, zlib's 32 KiB window). */
#define PNG_DECODER_BYTES ((size_t)64 << 10)
size_t png_decode_bytes(const png_header *h);

#endif
