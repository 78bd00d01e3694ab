/* Resident memory, as the kernel counts it, so that snug and PyTorch are measured the same way whatever their
 * allocators do: VmRSS (now) and VmHWM (the high-water mark) from /proc/self/status. Writing "5" to
 * /proc/self/clear_refs sets VmHWM back to the current RSS (Linux >= 4.0, proc(5)), so the peak of one
 * measurement is not the peak of whatever ran before it in the same process. */
#define _GNU_SOURCE /* malloc_trim */
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "bench.h"

/* "VmRSS:    12345 kB" -> bytes */
static bool parse_kb(const char *line, const char *key, size_t *bytes) {
    size_t klen = strlen(key);
    unsigned long long kb;
    if (strncmp(line, key, klen) != 0 || sscanf(line + klen, " %llu kB", &kb) != 1) return false;
    *bytes = (size_t)kb * 1024;
    return true;
}

bool bench_rss_read(size_t *rss, size_t *hwm) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return false;
    char line[256];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        found += parse_kb(line, "VmRSS:", rss);
        found += parse_kb(line, "VmHWM:", hwm);
    }
    fclose(f);
    return found == 2;
}

bool bench_rss_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Freed heap memory stays resident until the allocator gives it back; memory the probe or the data generation
 * freed would otherwise count in the baseline and be reused by the step unseen, making activations look
 * smaller than they are (PyTorch's side calls the same function through ctypes). */
void bench_rss_release_freed(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
