/* kernels/isa.h: the instruction sets the kernels use are the CPU's (as the compiler's own CPU query reports
 * them), and a cap lowers every kernel family's choice at once: the AVX-512 products, the bf16 product and
 * attention's AVX2 path. */
#define _GNU_SOURCE /* syscall */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/bgemm.h"
#include "kernels/gemm_direct.h"
#include "kernels/isa.h"
#include "kernels/small_gemm_path.h"

/* Whether /proc/cpuinfo lists a flag: a second reading of what isa.c asks the CPU. */
static bool cpuinfo_flag(const char *flag) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    static char line[16384];
    bool has = false;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            const char *delims = " \t\n";
            for (char *t = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, delims); t;
                 t = strtok(NULL, delims))
                has = has || strcmp(t, flag) == 0;
            break;
        }
    if (f) fclose(f);
    return has;
}

static bool amx_cpuinfo(void) { return cpuinfo_flag("amx_tile") && cpuinfo_flag("amx_bf16"); }

/* Whether Linux grants this process the AMX tile state (asked again: a grant is idempotent). */
static bool amx_granted(void) {
#if defined(__x86_64__) && defined(__linux__)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return false;
#endif
}

static void detects_what_the_cpu_has(void **state) {
    (void)state;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
    const bool bf16 = avx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
    const kernel_isa want = bf16 && amx_cpuinfo() && amx_granted() ? KERNEL_ISA_AMX_BF16
                            : bf16 ? KERNEL_ISA_AVX512_BF16
                            : avx512 ? KERNEL_ISA_AVX512
                            : avx2 ? KERNEL_ISA_AVX2
                                   : KERNEL_ISA_PORTABLE;
    printf("# this CPU: %s\n", kernel_isa_name(kernel_isa_cpu()));
    assert_int_equal(kernel_isa_cpu(), want);
#else
    assert_int_equal(kernel_isa_cpu(), KERNEL_ISA_PORTABLE);
#endif
}

/* Whether /proc/cpuinfo names AMD as the vendor: a second reading of what isa.c asks the CPU. */
static bool amd_cpuinfo(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    bool amd = false;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "vendor_id", 9) == 0) {
            amd = strstr(line, "AuthenticAMD") != NULL;
            break;
        }
    if (f) fclose(f);
    return amd;
}

static void a_cap_lowers_every_family(void **state) {
    (void)state;
    const kernel_isa cpu = kernel_isa_cpu();
    for (int isa = KERNEL_ISA_PORTABLE; isa <= KERNEL_ISA_AMX_BF16; isa++) {
        kernel_isa_cap((kernel_isa)isa);
        const kernel_isa now = kernel_isa_now();
        assert_int_equal(now, isa < (int)cpu ? isa : (int)cpu);
        assert_int_equal(gemm_direct_has_avx512(), now >= KERNEL_ISA_AVX512);
        assert_int_equal(bgemm_enabled(), now >= KERNEL_ISA_AVX512_BF16);
        /* vdpbf16ps pays only on an AMD core (isa.h); bgemm's products there and wherever AMX tiles run */
        assert_int_equal(kernel_bf16_dots_pay(), now >= KERNEL_ISA_AVX512_BF16 && amd_cpuinfo());
        assert_int_equal(kernel_bf16_products_pay(),
                         (now >= KERNEL_ISA_AVX512_BF16 && amd_cpuinfo()) || now >= KERNEL_ISA_AMX_BF16);
        assert_int_equal(small_gemm_path_available(SMALL_GEMM_AVX2), now >= KERNEL_ISA_AVX2);
        assert_int_equal(small_gemm_path_available(SMALL_GEMM_AVX512), now >= KERNEL_ISA_AVX512);
    }
    kernel_isa_cap(KERNEL_ISA_AMX_BF16);
    assert_int_equal(kernel_isa_now(), cpu);
}

static void names_parse(void **state) {
    (void)state;
    for (int isa = KERNEL_ISA_PORTABLE; isa <= KERNEL_ISA_AMX_BF16; isa++) {
        kernel_isa back;
        assert_true(kernel_isa_parse(kernel_isa_name((kernel_isa)isa), &back));
        assert_int_equal(back, isa);
    }
    kernel_isa x;
    assert_false(kernel_isa_parse("avx512f", &x));
    assert_false(kernel_isa_parse("", &x));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(detects_what_the_cpu_has),
        cmocka_unit_test(a_cap_lowers_every_family),
        cmocka_unit_test(names_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
