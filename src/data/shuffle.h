/* The sample order of an epoch: a pure function of (seed, epoch), drawn from the counter-based RNG, so every
 * rank, every micro-batch size and every resumed run sees the same order without carrying state. */
#ifndef SNUG_DATA_SHUFFLE_H
#define SNUG_DATA_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

/* Writes a uniformly random permutation of 0..n-1 (Fisher-Yates) for this (seed, epoch) into perm. */
void shuffle_permutation(uint64_t seed, uint64_t epoch, size_t *perm,  // (n)
                         size_t n);

/* Writes 0..n-1 into perm: the order when shuffling is off (evaluation). */
void identity_permutation(size_t *perm,  // (n)
                          size_t n);

#endif
