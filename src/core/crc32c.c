/* crc32c_update (crc32c.h): reflected polynomial 0x82f63b78, initial value and final xor all ones. */
#include "core/crc32c.h"

#include <stdbool.h>
#include <string.h>

#define POLY 0x82f63b78u

static uint32_t table[256];

static void fill_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[i] = c;
    }
}

static uint32_t by_table(uint32_t c, const unsigned char *p, size_t len) {
    if (!table[1]) fill_table(); /* a benign race: every thread writes the same values */
    while (len--) c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t by_instruction(uint32_t c, const unsigned char *p, size_t len) {
    uint64_t c64 = c;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
    }
    c = (uint32_t)c64;
    for (; len; p++, len--) c = __builtin_ia32_crc32qi(c, *p);
    return c;
}

static bool has_instruction(void) {
    static int known = -1; /* a benign race, as above */
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("sse4.2");
    }
    return known == 1;
}
#endif

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len) {
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (has_instruction()) return ~by_instruction(c, data, len);
#endif
    return ~by_table(c, data, len);
}
