/* A data file read in pieces with pread, never mapped: what a data set reads of it lands in the caller's buffer
 * (a micro-batch), so the file's pages stay the operating system's page cache and never become this process's
 * resident memory, and a data set of any size fits a budget. pread keeps no file position, so the threads that
 * fill one micro-batch read one file at once.
 *
 * A file is checked when opened (a regular, non-empty file); a read that fails later (the file truncated or its
 * disk failing under a run) leaves zeros, and its first failure is kept for data_file_status, which the trainer
 * asks after each read (dataset_ops.read_status). */
#ifndef SNUG_DATA_DATA_FILE_H
#define SNUG_DATA_DATA_FILE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

typedef struct data_file {
    int fd;                 /* -1 when closed */
    size_t len;             /* bytes, as opened */
    char *path;             /* for messages */
    atomic_int failed;      /* the errno of the first failed read (EIO for a short one); 0: none */
    atomic_size_t failed_at;
} data_file;

/* Opens path for reading: a regular file of at least min_len bytes. `expected` says what it should be in
 * messages ("an IDX file"); `missing` is added to the message when there is no such file (NULL: nothing). */
snug_status data_file_open(const char *path, const char *expected, const char *missing, size_t min_len,
                           data_file *f, snug_error *err);

/* Reads len bytes at offset into buf; false (buf zeroed, the failure kept) when they cannot all be read. */
bool data_file_read(data_file *f, size_t offset, void *buf, size_t len);

/* SNUG_OK, or the first failed read since the file was opened, named. */
snug_status data_file_status(const data_file *f, snug_error *err);

/* Closes the file; harmless on a closed or zeroed one, and twice. */
void data_file_close(data_file *f);

#endif
