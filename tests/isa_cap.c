/* Compiled into every unit test: SNUG_TEST_ISA=portable|avx2|avx512 runs the test's kernels as on a CPU with at
 * most that instruction set (kernels/isa.h), so CTest runs the ISA-dispatched promises on this host through the
 * paths other hosts take (the tests named *_avx2 and *_portable in cmake/SnugTests.cmake). A name it does not
 * know stops the test: a cap silently not applied would pass for the wrong reason. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/isa.h"

__attribute__((constructor)) static void cap_from_environment(void) {
    const char *name = getenv("SNUG_TEST_ISA");
    if (!name || !*name) return;
    kernel_isa isa;
    if (!kernel_isa_parse(name, &isa)) {
        fprintf(stderr, "SNUG_TEST_ISA=%s: not one of portable, avx2, avx512, avx512_bf16, amx_bf16\n", name);
        exit(2);
    }
    kernel_isa_cap(isa);
    printf("# kernels capped at %s (this CPU runs %s)\n", kernel_isa_name(kernel_isa_now()),
           kernel_isa_name(kernel_isa_cpu()));
}
