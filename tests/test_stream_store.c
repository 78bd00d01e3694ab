/* The non-temporal copy and zeroing (src/core/stream_store.c): every length and every alignment of the
 * destination and the source copies (or zeroes) exactly, and nothing beside the destination is written. The
 * vector loop, its aligned head and its tail each get lengths that end inside them, so an off-by-one in any of
 * the three shows here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "core/stream_store.h"

#define GUARD 64
#define MAX_N 200

static void copies_every_length_and_alignment(void **unused) {
    (void)unused;
    _Alignas(64) float dst[MAX_N + 2 * GUARD];
    _Alignas(64) float src[MAX_N + 2 * GUARD];
    for (size_t i = 0; i < MAX_N + 2 * GUARD; i++) src[i] = (float)i * 0.5f + 1.0f;
    for (size_t dst_off = 0; dst_off < 17; dst_off++)
        for (size_t src_off = 0; src_off < 17; src_off += 3)
            for (size_t n = 0; n <= MAX_N - 20; n++) {
                for (size_t i = 0; i < MAX_N + 2 * GUARD; i++) dst[i] = -7.0f;
                float *d = dst + GUARD + dst_off;
                stream_floats(d, src + GUARD + src_off, n);
                stream_fence();
                assert_memory_equal(d, src + GUARD + src_off, n * sizeof(float));
                for (float *q = dst; q < d; q++) assert_true(*q == -7.0f);
                for (float *q = d + n; q < dst + MAX_N + 2 * GUARD; q++) assert_true(*q == -7.0f);
            }
}

static void zeroes_every_length_and_alignment(void **unused) {
    (void)unused;
    _Alignas(64) float dst[MAX_N + 2 * GUARD];
    for (size_t dst_off = 0; dst_off < 17; dst_off++)
        for (size_t n = 0; n <= MAX_N - 20; n++) {
            for (size_t i = 0; i < MAX_N + 2 * GUARD; i++) dst[i] = -7.0f;
            float *d = dst + GUARD + dst_off;
            stream_zero_floats(d, n);
            stream_fence();
            for (size_t i = 0; i < n; i++) assert_memory_equal(&d[i], &(float){0.0f}, sizeof(float)); /* +0 */
            for (float *q = dst; q < d; q++) assert_true(*q == -7.0f);
            for (float *q = d + n; q < dst + MAX_N + 2 * GUARD; q++) assert_true(*q == -7.0f);
        }
}

/* Special values pass bit for bit: the copy never goes through arithmetic. */
static void copies_bits(void **unused) {
    (void)unused;
    const uint32_t bits[] = {0x80000000u, 0x7fc00001u, 0xffc00000u, 0x7f800000u, 0x00000001u, 0x3f800000u,
                             0xff800000u, 0x807fffffu, 0x12345678u, 0x00000000u, 0x7f7fffffu, 0x80000001u,
                             0x7fa00000u, 0x3eaaaaabu, 0xbf800000u, 0x00800000u, 0x7fffffffu};
    enum { N = sizeof bits / sizeof bits[0] };
    _Alignas(64) float src[N], dst[N];
    memcpy(src, bits, sizeof src);
    stream_floats(dst, src, N);
    stream_fence();
    assert_memory_equal(dst, bits, sizeof bits);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copies_every_length_and_alignment),
        cmocka_unit_test(copies_bits),
        cmocka_unit_test(zeroes_every_length_and_alignment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
