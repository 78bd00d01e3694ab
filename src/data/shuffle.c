/* Fisher-Yates over the counter-based RNG: the swap partner of position i is draw number i of the epoch's
 * stream. The stream carries a tag so that an epoch's shuffle never replays the numbers another user of the
 * RNG (dropout, initialisation) draws from stream `epoch` with the same seed. */
#include "data/shuffle.h"

#include "core/rng.h"

#define SHUFFLE_STREAM_TAG UINT64_C(0x73687566666c6500) /* "shuffle\0" */

void identity_permutation(size_t *perm, size_t n) {  // perm: (n)
    for (size_t i = 0; i < n; i++) perm[i] = i;
}

void shuffle_permutation(uint64_t seed, uint64_t epoch, size_t *perm, size_t n) {  // perm: (n)
    identity_permutation(perm, n);
    const uint64_t stream = SHUFFLE_STREAM_TAG ^ epoch;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)snug_rng_below(seed, stream, i - 1, i);  /* uniform in [0, i) */
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}
