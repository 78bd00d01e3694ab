/* vmath: float exp and erf that the compiler can vectorise. libm's expf and erff are opaque calls, so a loop
 * over them runs one element at a time; these are branch-free inline functions (selects, no calls) that GCC and
 * Clang vectorise inside a `#pragma omp simd` loop. expf is within 1 ulp, erff within 1.5 ulp and 1e-7 absolute
 * (tests/test_vmath.c sweeps their ranges and asserts these bounds); both handle the tails, subnormals,
 * infinities and NaN as libm does, and compute every element the same way, so a result never depends on where
 * the vector loop splits a range (the build contracts no multiply-add: -std=c11 means -ffp-contract=off).
 *
 * The polynomial coefficients are least-squares fits on Chebyshev nodes at 40 digits, weighted so that the
 * residual is the error of the final result (a relative error for exp and for erf near 0, an absolute one for
 * erf near 1); each fit is far below float rounding (1e-9 or better), so the float evaluation sets the error. */
#ifndef SNUG_KERNELS_VMATH_H
#define SNUG_KERNELS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/clones.h" /* VM_KERNEL: the AVX-512 / AVX2 / SSE2 clones of a kernel */

static inline float vm_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t vm_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* c ? a : b by a bit mask, not a branch: a branch here lets the compiler fold a constant into one path, and an
 * FP operation on a constant that may overflow is one it will not execute unconditionally, so the loop would
 * not vectorise. */
static inline float vm_select(int c, float a, float b) {
    const uint32_t m = 0u - (uint32_t)(c != 0);
    return vm_from_bits((vm_to_bits(a) & m) | (vm_to_bits(b) & ~m));
}

/* 2^k for an integer k in [-126, 127], built from its exponent bits (unsigned: wraps, never overflows). */
static inline float vm_pow2i(uint32_t k) { return vm_from_bits((k + 127u) << 23); }

/* e^x to about 1 ulp. x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2, e^r by a polynomial, and 2^n
 * applied as two factors 2^(n/2) 2^(n - n/2) so that subnormal results round once, correctly scaled, without a
 * branch. Outside [-104, 88.8] the result is selected, 0 or infinity, and the lane computes e^0 instead: an
 * underflowing multiply costs a microcode assist on x86 (3x slower here), and inputs far below -104 are common
 * (GELU's exp(-x^2 / 2) of large activations). NaN fails every comparison and makes the polynomial NaN; n is
 * read from the bits of the rounded sum, not converted, so a NaN never meets a float-to-int conversion. */
static inline float vm_expf(float x) {
    const float shifter = 12582912.0f;                  /* 1.5 * 2^23: adding it rounds to an integer */
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f; /* ln2_hi * n is exact for |n| < 2^15 */
    const int under = x < -104.0f, over = x > 88.8f;
    const float xc = vm_select(under | over, 0.0f, x);
    const float sn = xc * 1.44269502f + shifter;        /* shifter + n: n in the low mantissa bits */
    const float n = sn - shifter;
    const float r = (xc - n * ln2_hi) - n * ln2_lo;
    /* e^r = 1 + r + r^2 g(r), g(r) = (e^r - 1 - r) / r^2 */
    const float g = 5.00000008e-1f +
                    r * (1.66666662e-1f + r * (4.16662703e-2f + r * (8.33342998e-3f +
                    r * (1.39460208e-3f + r * 1.98264962e-4f))));
    const float p = 1.0f + (r + r * r * g);
    const uint32_t k = vm_to_bits(sn) - vm_to_bits(shifter);  /* n mod 2^32 */
    const uint32_t k1 = (uint32_t)((int32_t)k >> 1);              /* floor(n / 2) */
    const float y = p * vm_pow2i(k1) * vm_pow2i(k - k1);
    return vm_select(under, 0.0f, vm_select(over, HUGE_VALF, y));
}

/* erf(x) to about 1.5 ulp. |x| < 1: x P(x^2) (vm_erff_near0). Above: erf = 1 - erfc, erfc(t) = exp(Q(t)) with Q
 * a fit of log erfc weighted by erfc (its error matters only as much as erfc itself); t is clamped at 4, where
 * erfc < 2^-25 and erf rounds to 1. Both branches are computed and one selected: no branch to stop the vector
 * loop. NaN fails every comparison, so it reaches Q and comes out NaN. A caller whose inputs all lie in (-1, 1)
 * may call vm_erff_near0 alone: the same bits as vm_erff there, for a quarter of its work. */
static inline float vm_erff_near0(float x) {
    const float s = x * x;
    /* x + x (2/sqrt(pi) - 1 + ...): the correction term, at most 0.13 x, carries the rounding errors */
    return x + x * (1.28379166e-1f + s * (-3.76126269e-1f + s * (1.12835975e-1f + s * (-2.68543288e-2f +
                    s * (5.18931194e-3f + s * (-8.01885499e-4f + s * 7.88249711e-5f))))));
}

static inline float vm_erff(float x) {
    const float a = fabsf(x);
    const float small = vm_erff_near0(x);
    const float t = vm_select(a > 4.0f, 4.0f, a);
    const float q = -3.41962343e-4f + t * (-1.12708892f + t * (-6.38142486e-1f + t * (-1.03111457e-1f +
                    t * (2.18417071e-2f + t * (-2.94894595e-3f + t * 1.86551710e-4f)))));
    const float large = copysignf(1.0f - vm_expf(q), x);
    return vm_select(a < 1.0f, small, large);
}

#endif
