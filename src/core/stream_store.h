/* Stores that bypass the caches (non-temporal), for lines another core is likely to hold when this one writes
 * them: the optimizer's new parameters (every thread read them in the products), and the per-thread partial
 * weight gradients of the convolutions, zeroed at every call after the other thread read them in the last
 * call's reduction.
 *
 * Why: a store to a line another core holds must first take it from that core (a read for ownership, and an
 * invalidation the store waits for). The forward and backward products read every weight from both threads, so
 * every parameter line is in both cores' caches when the update writes it. Where the host puts the two vCPUs
 * on chiplets that share no cache, each of those waits is a round trip between chiplets (~330 ns, against
 * ~80 sharing one): there these stores halve the mlp's update; sharing a cache they cost nothing
 * (docs/performance.md). A non-temporal store writes the whole line to memory and invalidates the other copies
 * without the core waiting. */
#ifndef SNUG_CORE_STREAM_STORE_H
#define SNUG_CORE_STREAM_STORE_H

#include <stddef.h>

/* dst[0..n) = src[0..n), the aligned lines of dst written past the caches (the edges of an unaligned dst with
 * plain stores). Bit-for-bit a copy. The stores are weakly ordered: call stream_fence before another thread may
 * read dst. */
void stream_floats(float *restrict dst, const float *restrict src, size_t n);

/* dst[0..n) = 0, as stream_floats stores. */
void stream_zero_floats(float *dst, size_t n);

/* Orders this thread's earlier stream_floats stores before its later stores (an sfence), so that a barrier
 * after it publishes them to the other threads. */
void stream_fence(void);

#endif
