/* The instruction sets the kernels may use (isa.h). */
#define _GNU_SOURCE /* syscall: the request for the AMX tile state */
#include "kernels/isa.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SNUG_AMX 1
#endif

#include "kernels/avx512.h" /* SNUG_AVX512: whether this compiler builds AVX-512 code */

static const char *const names[] = {"portable", "avx2", "avx512", "avx512_bf16", "amx_bf16"};

static kernel_isa cap = KERNEL_ISA_AMX_BF16;

/* AMX tiles with bf16 products, their state granted to this process. CPUID.(7,0):EDX says the CPU has them
 * (bit 22 AMX-BF16, bit 24 AMX-TILE); Linux enables the tile data state per process on request (its 8 KiB
 * are saved only for processes that ask), and a tile instruction before the grant is a fault. The grant holds
 * for every thread of the process, those started later included. */
static bool amx_granted(void) {
#ifdef SNUG_AMX
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & 1u << 22) || !(d & 1u << 24)) return false;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static kernel_isa detect(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* libgcc reports AVX-512 only where XCR0 says the OS saves its state */
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return KERNEL_ISA_PORTABLE;
#ifdef SNUG_AVX512
    if (!__builtin_cpu_supports("avx512f")) return KERNEL_ISA_AVX2;
    if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512bf16")) return KERNEL_ISA_AVX512;
    return amx_granted() ? KERNEL_ISA_AMX_BF16 : KERNEL_ISA_AVX512_BF16;
#else
    return KERNEL_ISA_AVX2;
#endif
#else
    return KERNEL_ISA_PORTABLE;
#endif
}

kernel_isa kernel_isa_cpu(void) {
    static int known = -1; /* a benign race: every thread computes the same answer */
    if (known < 0) known = (int)detect();
    return (kernel_isa)known;
}

kernel_isa kernel_isa_now(void) {
    const kernel_isa cpu = kernel_isa_cpu();
    return cpu < cap ? cpu : cap;
}

static bool amd_core(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
#else
    return false;
#endif
}

bool kernel_bf16_dots_pay(void) { return kernel_isa_now() >= KERNEL_ISA_AVX512_BF16 && amd_core(); }

bool kernel_bf16_products_pay(void) { return kernel_bf16_dots_pay() || kernel_isa_now() >= KERNEL_ISA_AMX_BF16; }

void kernel_isa_cap(kernel_isa most) { cap = most; }

bool kernel_isa_parse(const char *name, kernel_isa *out) {
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (kernel_isa)i;
            return true;
        }
    return false;
}

const char *kernel_isa_name(kernel_isa isa) { return names[isa]; }
