/* A counter-based random number generator: a draw is a pure function of (seed, stream, counter), so a replay
 * (recompute during backward, a resumed run, another rank) draws the same numbers without carrying state. */
#ifndef SNUG_CORE_RNG_H
#define SNUG_CORE_RNG_H

#include <stdint.h>

/* 64 random bits for (seed, stream, counter). */
uint64_t snug_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter);
/* Uniform in [0, 1) with 24 bits of precision (exactly representable as float). */
float snug_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter);
/* Uniform integer in [0, n) without modulo bias, n > 0. */
uint64_t snug_rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n);

#endif
