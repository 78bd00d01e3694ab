/* One image file, PNG or JPEG, told apart by its first bytes (a .jpg that is really a PNG, common in scraped data
 * sets, decodes as what it is); a file that is neither is handed to the decoder its name's extension asks for,
 * which says what is wrong with it. Delivered as png_read.h and jpeg_read.h deliver: 8-bit gray or RGB. */
#ifndef SNUG_DATA_IMAGE_DECODE_H
#define SNUG_DATA_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "snug.h"

typedef struct image_header {
    size_t height, width;
    size_t channels;      /* 1 or 3 */
    size_t decode_bytes;  /* what the decoding held at most (png_decode_bytes, jpeg_decode_bytes) */
} image_header;

/* Receives the decoded pixels, (height, width, channels) bytes interleaved. */
typedef snug_status (*image_pixels_fn)(void *ctx, const uint8_t *pixels, const image_header *h, snug_error *err);

/* png_decode or jpeg_decode of path (no size expected), *h filled and fn (when not NULL) called with the pixels;
 * their statuses and messages. */
snug_status image_decode(const char *path, image_header *h, image_pixels_fn fn, void *ctx, snug_error *err);
/* The size of the image at path from its header alone (a PNG's IHDR, a JPEG's start of frame), h->decode_bytes
 * what image_decode of it would hold: no pixel is allocated or decoded. Fails as image_decode does on a file
 * whose header is bad or over the decoders' bounds. */
snug_status image_read_size(const char *path, image_header *h, snug_error *err);

#endif
