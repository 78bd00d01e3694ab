/* The IDX format (LeCun's MNIST files): a 4-byte magic 00 00 <type> <ndims>, ndims big-endian uint32 dimensions,
 * then the elements row-major. Only type 0x08 (unsigned byte) is read. The file is read in pieces (data/data_file.h),
 * never mapped or copied whole: what a run holds of it is what it read into its micro-batch buffers. */
#ifndef SNUG_DATA_IDX_H
#define SNUG_DATA_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "data/data_file.h"
#include "snug.h"

#define IDX_MAX_DIMS 4

typedef struct idx_file {
    int ndims;
    size_t dims[IDX_MAX_DIMS];
    size_t count;         /* elements: the product of dims */
    size_t data_offset;   /* where the elements start: after the header */
    data_file file;
} idx_file;

/* Opens the IDX file at path and checks everything: magic, element type, ndims == expected_ndims (when > 0),
 * every dimension > 0, and that the header plus the elements fill the file exactly. On failure *f is left
 * closed (idx_close is harmless) and err names the path and the problem (SNUG_E_IO or SNUG_E_FORMAT). */
snug_status idx_open(const char *path, int expected_ndims, idx_file *f, snug_error *err);

/* Reads elements [first, first + n) into buf; false (buf zeroed, the failure kept for idx_status) when the file
 * can no longer be read. */
bool idx_read(idx_file *f, size_t first, size_t n, uint8_t *buf);
/* SNUG_OK, or the first failed read, naming the file. */
snug_status idx_status(const idx_file *f, snug_error *err);

/* Closes the file; safe on a closed or zeroed idx_file, and twice. */
void idx_close(idx_file *f);

#endif
