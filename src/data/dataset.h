/* A dataset is a table of functions over samples. The trainer reads targets before inputs: it counts the items
 * of a whole global batch (for the loss normaliser) before the first forward, without touching the inputs. */
#ifndef SNUG_DATA_DATASET_H
#define SNUG_DATA_DATASET_H

#include "snug.h"

typedef struct dataset_ops {
    /* Writes the inputs of samples idx[0..n) into x, (n, sample shape) floats, normalised. */
    void (*fill_inputs)(const snug_dataset *ds, const size_t *idx, size_t n, float *x);
    /* Writes targets_per_sample targets per sample (class index, or SNUG_IGNORE_TARGET) into y. */
    void (*fill_targets)(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y);
    void (*destroy)(snug_dataset *ds);
    /* The first failed read since the data set was opened (a user's callback that returned false), or SNUG_OK;
     * NULL for data sets whose reads cannot fail (their files were checked when opened). A failed read leaves
     * zeros where its samples would be. */
    snug_status (*read_status)(const snug_dataset *ds, snug_error *err);
    /* The per-channel normalisation the samples were made with (snug_dataset_normalisation); NULL: none known. */
    bool (*normalisation)(const snug_dataset *ds, snug_normalise *out);
    /* The name of class i (snug_dataset_class_name); NULL: the classes are unnamed (numbers). */
    const char *(*class_name)(const snug_dataset *ds, size_t i);
    /* A standardised CSV table's columns and statistics (snug_dataset_table_stats); NULL: none. */
    bool (*table_stats)(const snug_dataset *ds, snug_table_stats *out);
} dataset_ops;

struct snug_dataset {
    const dataset_ops *ops;
    size_t n;                   /* samples */
    snug_shape sample_shape;    /* (C, H, W) */
    size_t sample_numel;
    size_t classes;
    size_t targets_per_sample;  /* 1 for classification */
    size_t memory_bytes;        /* what the data set keeps in memory itself (snug_dataset_memory) */
    size_t scratch_bytes;       /* what one thread's read of a sample holds while it decodes (a PNG image) */
    void *impl;                 /* the implementation's own state */
};

/* ds->ops->read_status, or SNUG_OK where reads cannot fail: the trainer asks after reading, before it uses
 * what it read. */
snug_status dataset_read_status(const snug_dataset *ds, snug_error *err);

#endif
