/* The public accessors of a dataset, whatever its implementation. An opener allocates the snug_dataset with
 * malloc; its destroy releases only what impl holds, and snug_dataset_free releases the struct itself. */
#include <stdint.h>
#include <stdlib.h>

#include "core/checked.h"
#include "data/dataset.h"

void snug_dataset_free(snug_dataset *ds) {
    if (!ds) return;
    if (ds->ops && ds->ops->destroy) ds->ops->destroy(ds);
    free(ds);
}

size_t snug_dataset_size(const snug_dataset *ds) { return ds ? ds->n : 0; }

snug_shape snug_dataset_sample_shape(const snug_dataset *ds) {
    if (!ds) return (snug_shape){0};
    return ds->sample_shape;
}

size_t snug_dataset_classes(const snug_dataset *ds) { return ds ? ds->classes : 0; }

const char *snug_dataset_class_name(const snug_dataset *ds, size_t i) {
    if (!ds || !ds->ops->class_name || i >= ds->classes) return NULL;
    return ds->ops->class_name(ds, i);
}

size_t snug_dataset_memory(const snug_dataset *ds, int threads) {
    if (!ds) return 0;
    const size_t t = threads > 1 ? (size_t)threads : 1;
    size_t scratch, total;
    if (!size_mul(ds->scratch_bytes, t, &scratch) || !size_add(ds->memory_bytes, scratch, &total)) return SIZE_MAX;
    return total;
}

snug_status dataset_read_status(const snug_dataset *ds, snug_error *err) {
    return ds->ops->read_status ? ds->ops->read_status(ds, err) : SNUG_OK;
}

bool snug_dataset_table_stats(const snug_dataset *ds, snug_table_stats *out) {
    return ds && ds->ops->table_stats && ds->ops->table_stats(ds, out);
}

bool snug_dataset_normalisation(const snug_dataset *ds, snug_normalise *out) {
    return ds && ds->ops->normalisation && ds->ops->normalisation(ds, out);
}
