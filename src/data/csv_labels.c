/* Class names of a CSV table's label column (data/csv_labels.h): an open-addressing hash table over the names
 * (FNV-1a, linear probing, doubled at half full), and the sorting that turns first-sight numbers into strcmp
 * order. */
#define _POSIX_C_SOURCE 200809L
#include "data/csv_labels.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_SLOTS 64

static uint64_t hash_name(const char *s) {
    uint64_t h = 14695981039346656037u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* The slot that holds name, or the empty slot where it would go. */
static size_t *slot_of(const label_set *s, const char *name) {
    const size_t mask = s->nslots - 1;
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        size_t *slot = &s->slots[i];
        if (*slot == 0 || strcmp(s->names[*slot - 1], name) == 0) return slot;
    }
}

/* Twice the slots (FIRST_SLOTS at first), every name placed again. */
static bool rehash(label_set *s) {
    const size_t n = s->nslots ? 2 * s->nslots : FIRST_SLOTS;
    size_t *slots = calloc(n, sizeof *slots);
    if (!slots) return false;
    free(s->slots);
    s->slots = slots;
    s->nslots = n;
    for (size_t i = 0; i < s->count; i++) *slot_of(s, s->names[i]) = i + 1;
    return true;
}

static bool append(label_set *s, const char *name) {
    if (s->count == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : FIRST_SLOTS / 2;
        char **names = realloc(s->names, cap * sizeof *names);
        if (!names) return false;
        s->names = names;
        s->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return false;
    s->names[s->count++] = copy;
    return true;
}

bool label_set_id(label_set *s, const char *name, size_t *id) {
    if (2 * (s->count + 1) > s->nslots && !rehash(s)) return false;
    size_t *slot = slot_of(s, name);
    if (*slot == 0) {
        if (s->count >= CSV_MAX_CLASSES || !append(s, name)) return false;
        *slot = s->count;
    }
    *id = *slot - 1;
    return true;
}

typedef struct named_index {
    const char *name;
    size_t index;
} named_index;

static int compare_named(const void *a, const void *b) {
    const named_index *x = a, *y = b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

bool label_sort_indices(size_t *idx, size_t n, char *const *names) {
    named_index *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return false;
    for (size_t i = 0; i < n; i++) v[i] = (named_index){names[idx[i]], idx[i]};
    qsort(v, n, sizeof *v, compare_named);
    for (size_t i = 0; i < n; i++) idx[i] = v[i].index;
    free(v);
    return true;
}

bool label_set_sort(label_set *s, int32_t *y, size_t n, char ***sorted) {
    size_t *order = malloc((s->count ? s->count : 1) * sizeof *order);
    size_t *rank = malloc((s->count ? s->count : 1) * sizeof *rank);
    char **names = malloc((s->count ? s->count : 1) * sizeof *names);
    bool ok = order && rank && names;
    if (ok) {
        for (size_t i = 0; i < s->count; i++) order[i] = i;
        ok = label_sort_indices(order, s->count, s->names);
    }
    if (ok) {
        for (size_t k = 0; k < s->count; k++) {
            rank[order[k]] = k;
            names[k] = s->names[order[k]];
        }
        for (size_t i = 0; i < n; i++) y[i] = (int32_t)rank[y[i]];
        free(s->names);
        s->names = NULL;
        s->count = s->cap = 0;
        *sorted = names;
    } else {
        free(names);
    }
    free(order);
    free(rank);
    return ok;
}

void label_set_free(label_set *s) {
    for (size_t i = 0; i < s->count; i++) free(s->names[i]);
    free(s->names);
    free(s->slots);
    *s = (label_set){0};
}

bool label_copy(char *const *names, size_t count, char ***out) {
    char **copy = calloc(count ? count : 1, sizeof *copy);
    bool ok = copy != NULL;
    for (size_t i = 0; ok && i < count; i++) ok = (copy[i] = strdup(names[i])) != NULL;
    if (!ok && copy)
        for (size_t i = 0; i < count; i++) free(copy[i]);
    if (!ok) free(copy);
    *out = ok ? copy : NULL;
    return ok;
}

bool label_find_sorted(char *const *sorted, size_t count, const char *name, size_t *id) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const int c = strcmp(sorted[mid], name);
        if (c == 0) {
            *id = mid;
            return true;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return false;
}
