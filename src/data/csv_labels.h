/* Class names of a CSV table's label column (data/csv.c): the distinct names met while reading, numbered in
 * order of first sight through a hash table, then sorted by strcmp and the labels renumbered, so that class i is
 * the i-th name whatever the order of the rows. */
#ifndef SNUG_DATA_CSV_LABELS_H
#define SNUG_DATA_CSV_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most classes a label column may hold: more is almost surely a column of ids or values chosen as labels. */
#define CSV_MAX_CLASSES 65536

typedef struct label_set {
    char **names;     /* (count) in order of first sight */
    size_t count, cap;
    size_t *slots;    /* (nslots) a name's index + 1, 0 for an empty slot; at most half are used */
    size_t nslots;
} label_set;

/* The number of name in s, added when new. False when it cannot be added: out of memory, or CSV_MAX_CLASSES
 * names already. */
bool label_set_id(label_set *s, const char *name, size_t *id);
/* Sorts s's names, renumbers the n labels y (numbers of label_set_id) to the sorted order, and hands the sorted
 * names to *sorted (s keeps none). False when out of memory (y and s unchanged). */
bool label_set_sort(label_set *s, int32_t *y, size_t n, char ***sorted);
void label_set_free(label_set *s);

/* A copy of names[0..count) into *out; false when out of memory (*out NULL). */
bool label_copy(char *const *names, size_t count, char ***out);
/* Whether name is among sorted[0..count) (strcmp order); *id its index. */
bool label_find_sorted(char *const *sorted, size_t count, const char *name, size_t *id);
/* Orders idx[0..n) (indices into names) by their names' strcmp order, equal names by index; false when out of
 * memory (idx unchanged). */
bool label_sort_indices(size_t *idx, size_t n, char *const *names);

#endif
