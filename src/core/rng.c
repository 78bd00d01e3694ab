/* Counter-based RNG: two rounds of the splitmix64 finaliser over a key mixed from (seed, stream, counter).
 * Statistically strong enough for initialisation, shuffling and dropout, and stateless, so any draw can be
 * replayed exactly from its coordinates. */
#include "core/rng.h"

__extension__ typedef unsigned __int128 u128;

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t snug_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter) {
    /* Each coordinate goes through the mixer before it is combined, so nearby (stream, counter) pairs do not
     * collide the way a plain sum would. */
    uint64_t k = mix64(seed + 0x9e3779b97f4a7c15ULL);
    k = mix64(k ^ (stream * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL));
    return mix64(k ^ (counter * 0x9e3779b97f4a7c15ULL + 0x8cb92ba72f3d8dd7ULL));
}

float snug_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
    return (float)(snug_rng_bits(seed, stream, counter) >> 40) * (1.0f / 16777216.0f);
}

uint64_t snug_rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n) {
    /* Lemire's multiply-shift with rejection; redraws use a derived counter so the result stays a pure
     * function of the coordinates. */
    uint64_t threshold = (0 - n) % n;
    for (uint64_t attempt = 0;; attempt++) {
        uint64_t x = snug_rng_bits(seed, stream, counter + attempt * 0x5851f42d4c957f2dULL);
        u128 p = (u128)x * n;
        if ((uint64_t)p >= threshold) return (uint64_t)(p >> 64);
    }
}
