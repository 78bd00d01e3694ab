/* The instruction sets snug's own kernels may use: what this build and CPU run, lowered where a test asks for it.
 *
 * Every kernel with a path per instruction set asks here (gemm_direct_has_avx512, bgemm_enabled, small_gemm's
 * AVX2 path), so one cap sends a whole process down the paths of a smaller CPU: the suite runs on an AVX-512 host
 * what an AVX2-only host runs, and each promise is checked through the paths other machines take. The
 * element-wise clones of core/clones.h are chosen by the loader and give the same bits in every clone, and the
 * BLAS picks its own kernel (OpenBLAS reads OPENBLAS_CORETYPE), so neither is capped here. */
#ifndef SNUG_KERNELS_ISA_H
#define SNUG_KERNELS_ISA_H

#include <stdbool.h>

typedef enum kernel_isa {
    KERNEL_ISA_PORTABLE,    /* plain C (the BLAS for the products that have no portable kernel of snug's) */
    KERNEL_ISA_AVX2,        /* AVX2 and FMA */
    KERNEL_ISA_AVX512,      /* AVX-512 F (and BW, DQ, VL where a kernel needs them: every AVX-512 CPU has them) */
    KERNEL_ISA_AVX512_BF16, /* and AVX512_BF16's vdpbf16ps */
    KERNEL_ISA_AMX_BF16,    /* and AMX tiles with bf16 products (tdpbf16ps), the OS having granted their state */
} kernel_isa;

/* The best this build and CPU can run. */
kernel_isa kernel_isa_cpu(void);
/* What the kernels use now: kernel_isa_cpu(), or less after kernel_isa_cap. */
kernel_isa kernel_isa_now(void);
/* Whether vdpbf16ps pays on this CPU: AVX512_BF16 in use (kernel_isa_now) on a core that retires it at float32
 * FMA's rate, so that each instruction does twice the multiply-adds (AMD Zen 4 and Zen 5). Intel's AVX512_BF16
 * cores (Cooper Lake, Sapphire Rapids and later) retire it at most at FMA's rate and, on the 16-core Xeon of
 * docs/performance.md and the AMX Xeons, at half of it: there bgemm's vdpbf16ps tile and conv3x3_bf16 measured
 * 0.52-0.70x float32 whole steps. The kernels built on vdpbf16ps alone (conv3x3_bf16, the bf16 Winograd weight
 * gradient) ask here. A property of the CPU, not a measurement, so that a plan depends only on its graph, its
 * request and the machine. */
bool kernel_bf16_dots_pay(void);
/* Whether bgemm's bfloat16 products pay on this CPU: vdpbf16ps pays (kernel_bf16_dots_pay), or AMX tiles are in
 * use, whose tdpbf16ps does 16 x 16 x 32 multiply-adds at a time (many times float32 FMA's rate). Where neither,
 * bf16 plans keep float32 products on the rounded values. */
bool kernel_bf16_products_pay(void);
/* For tests: later kernels, plans and trainers run as on a CPU with at most `most`. Set before anything is
 * planned (a plan sizes its workspace for the kernels it will run), not while a product runs. */
void kernel_isa_cap(kernel_isa most);
/* "portable", "avx2", "avx512", "avx512_bf16", "amx_bf16" -> the set; false for any other name. */
bool kernel_isa_parse(const char *name, kernel_isa *out);
const char *kernel_isa_name(kernel_isa isa);

#endif
