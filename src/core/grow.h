/* Growing arrays that are built one item at a time (the graph's nodes, a model file's sections). */
#ifndef SNUG_CORE_GROW_H
#define SNUG_CORE_GROW_H

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

/* Grows *items, an array of `size`-byte items with room for *cap, to hold at least `need`: doubling from 16, so
 * that n appends copy O(n) items. False when the system refuses memory or the count would pass INT_MAX; *items
 * and *cap are then unchanged. */
static inline bool grow_array(void **items, int *cap, int need, size_t size) {
    if (need <= *cap) return true;
    int ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > INT_MAX / 2) return false;
        ncap *= 2;
    }
    void *p = realloc(*items, (size_t)ncap * size);
    if (!p) return false;
    *items = p;
    *cap = ncap;
    return true;
}

#endif
