/* The IDX format (LeCun's MNIST files): a 4-byte magic 00 00 <type> <ndims>, ndims big-endian uint32 dimensions,
 * then the elements row-major. Only type 0x08 (unsigned byte) is read. The file is mapped read-only, not copied:
 * the data set is the operating system's page cache, not engine memory, so it does not count against a budget. */
#ifndef SNUG_DATA_IDX_H
#define SNUG_DATA_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "snug.h"

#define IDX_MAX_DIMS 4

typedef struct idx_file {
    int ndims;
    size_t dims[IDX_MAX_DIMS];
    size_t count;         /* elements: the product of dims */
    const uint8_t *data;  /* (dims[0], ..., dims[ndims-1]) bytes, inside the mapping */
    void *map;            /* the whole file as mapped (header included); NULL when closed */
    size_t map_len;
} idx_file;

/* Maps the IDX file at path and checks everything: magic, element type, ndims == expected_ndims (when > 0),
 * every dimension > 0, and that the header plus the elements fill the file exactly. On failure *f is left
 * closed (idx_close is harmless) and err names the path and the problem (SNUG_E_IO or SNUG_E_FORMAT). */
snug_status idx_open(const char *path, int expected_ndims, idx_file *f, snug_error *err);

/* Unmaps the file; safe on a closed or zeroed idx_file, and twice. */
void idx_close(idx_file *f);

#endif
