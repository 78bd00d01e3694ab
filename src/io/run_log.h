/* The run's log (snug_run_log_* in snug.h), read back: the formats by extension, one line as a record, a
 * reader that walks a log's whole lines (run_log_read.c), shared by a resumed log (run_log.c), which keeps the
 * lines before the step it continues from, and by the curve (curve_svg.c), which draws them. */
#ifndef SNUG_IO_RUN_LOG_H
#define SNUG_IO_RUN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snug.h"

typedef enum run_log_format {
    RUN_LOG_UNKNOWN = 0,
    RUN_LOG_JSONL, /* one JSON object per line */
    RUN_LOG_CSV,   /* a header row, then one row per line */
} run_log_format;

/* The format a path asks for by its extension (".jsonl", ".csv", any letter case), or RUN_LOG_UNKNOWN. */
run_log_format run_log_format_of(const char *path);

/* The CSV's columns, in the order the writer puts them; a line of the other type leaves a column empty. */
#define RUN_LOG_CSV_HEADER                                                                                     \
    "type,step,epoch,loss,lr,grad_norm,skipped,items,micro_batches,samples_per_s,elapsed_s,memory_bytes,set,"  \
    "accuracy,mean_iou,foreground_iou"

/* The columns, by position in RUN_LOG_CSV_HEADER. */
enum run_log_column {
    RUN_LOG_COL_TYPE, RUN_LOG_COL_STEP, RUN_LOG_COL_EPOCH, RUN_LOG_COL_LOSS, RUN_LOG_COL_LR, RUN_LOG_COL_GRAD_NORM,
    RUN_LOG_COL_SKIPPED, RUN_LOG_COL_ITEMS, RUN_LOG_COL_MICRO_BATCHES, RUN_LOG_COL_SAMPLES_PER_S,
    RUN_LOG_COL_ELAPSED_S, RUN_LOG_COL_MEMORY_BYTES, RUN_LOG_COL_SET, RUN_LOG_COL_ACCURACY, RUN_LOG_COL_MEAN_IOU,
    RUN_LOG_COL_FOREGROUND_IOU, RUN_LOG_COLUMNS
};

#define RUN_LOG_SET_MAX 64 /* bytes of an evaluation set's name, its NUL included */

typedef enum run_log_type { RUN_LOG_STEP = 0, RUN_LOG_EVAL } run_log_type;

/* One line. A number the line does not hold (the other type's fields, a CSV's empty cell, JSON's null for a
 * value that was not finite) reads as NaN, a count as 0. */
typedef struct run_log_record {
    run_log_type type;
    long step, epoch;
    double loss;
    size_t items;
    /* optimizer steps */
    double lr, grad_norm;
    bool skipped;
    size_t micro_batches, memory_bytes;
    double samples_per_s, elapsed_s;
    /* evaluations */
    char set[RUN_LOG_SET_MAX]; /* longer names are cut */
    double accuracy, mean_iou, foreground_iou;
} run_log_record;

/* Walks a log line by line. The text of the current line (its newline included) stays in `line` until the next
 * call; a CSV's header row is kept in `header`. */
typedef struct run_log_reader {
    FILE *f;
    const char *path;
    run_log_format format;
    long line_no;        /* of the current line, 1-based */
    char *line;
    size_t line_len, line_cap;
    char *header;        /* CSV: the header row as read, its newline included; NULL before one is read */
    int column[RUN_LOG_COLUMNS]; /* CSV: the field that holds each column, -1 where the header has none */
} run_log_reader;

/* Opens the log at path (and reads a CSV's header row). SNUG_E_ARG for another extension, SNUG_E_IO when the
 * file cannot be opened, SNUG_E_FORMAT for a header that lacks the columns type, step, epoch and loss. A file
 * with no whole line at all is an empty log. Close the reader whatever this returns. */
snug_status run_log_reader_open(run_log_reader *r, const char *path, snug_error *err);
/* The next whole line into rec: *got false at the end, where a partial last line (no newline: a run killed while
 * writing it) is ignored. A malformed line is SNUG_E_FORMAT, naming the file and the line number. */
snug_status run_log_reader_next(run_log_reader *r, run_log_record *rec, bool *got, snug_error *err);
void run_log_reader_close(run_log_reader *r);

#endif
