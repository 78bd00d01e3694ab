/* VM_KERNEL marks a function made of vectorisable loops: on x86-64 with GCC or Clang it is compiled three
 * times, for AVX-512, AVX2 and the baseline SSE2, and the loader picks the best the CPU has (an ifunc), so one
 * binary runs on any x86-64 and uses the wide vectors where they exist (the build itself has no -march).
 * Element-wise loops give the same bits in every version (no multiply-add is contracted: -std=c11 means
 * -ffp-contract=off); a loop with a reduction sums in an order that depends on the vector width unless it keeps
 * its own fixed set of partial sums, so such a kernel is deterministic on one machine, not across machines.
 * Elsewhere (other architectures, other compilers) it is a plain function.
 *
 * A VM_KERNEL function is static, and a kernel other files call is a plain function around it. Clang 16 names
 * the resolver of an exported clone `NAME.ifunc` and defines no `NAME`, so a call from another file does not
 * link (GCC and later Clang define `NAME`); inside its own file every compiler resolves the call. */
#ifndef SNUG_CORE_CLONES_H
#define SNUG_CORE_CLONES_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VM_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VM_KERNEL
#endif

#endif
