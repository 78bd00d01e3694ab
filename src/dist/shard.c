/* Contiguous shards of a global batch: rank r of R takes [floor(r*n/R), floor((r+1)*n/R)). */
#include "dist/dist.h"

/* floor(rank * n / size) without forming rank * n, which could overflow: n = q*size + s gives
 * rank*q + floor(rank*s / size), and rank*s < size^2 is small. */
static size_t shard_start(size_t n, int rank, int size) {
    size_t r = (size_t)rank, R = (size_t)size;
    return r * (n / R) + r * (n % R) / R;
}

void dist_shard(size_t n, int rank, int size, size_t *begin, size_t *len) {
    size_t b = shard_start(n, rank, size), e = shard_start(n, rank + 1, size);
    *begin = b;
    *len = e - b;
}
