/* The machine's memory (core/machine.h).
 *
 * What a plan is checked against is the hard ceiling, physical memory (sysconf, the kernel's MemTotal) and the
 * control group's limit, not /proc/meminfo's MemAvailable: MemAvailable is an estimate of the moment that moves
 * with the page cache and every other process, so a check on it would refuse a command one minute and let it run
 * the next, and it leaves out swap and the cache the kernel would drop for us. A plan over the ceiling can never
 * be reserved (zero-filling it ends in the kernel's OOM killer, or a cgroup's); one under it may still meet
 * memory that others hold, and that is the kernel's to settle. */
#define _POSIX_C_SOURCE 200809L
#include "core/machine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/checked.h"
#include "snug.h"

/* cgroup v1 says "no limit" with LONG_MAX rounded down to a page; no machine has 2^62 bytes. */
#define NO_LIMIT_FROM ((size_t)1 << 62)

/* A limit file: a byte count, or "max" (v2's no limit). 0: no limit, or not readable. */
static size_t read_limit(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char text[64] = "";
    const bool got = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    char *end;
    const unsigned long long v = got && text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
    return v > 0 && v < NO_LIMIT_FROM ? (size_t)v : 0;
}

static size_t tighter(size_t a, size_t b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* The smallest `file` limit from base + path up to base itself: a parent's limit binds its children too, and in
 * a container the hierarchy is mounted at the container's own group, where the path read from /proc (the
 * group's path on the host) does not exist below it. */
static size_t limit_along(const char *base, const char *path, const char *file) {
    char dir[4096], name[4200];
    if (snprintf(dir, sizeof dir, "%s%s", base, path) >= (int)sizeof dir) return 0;
    const size_t base_len = strlen(base);
    size_t limit = 0;
    for (;;) {
        snprintf(name, sizeof name, "%s/%s", dir, file);
        limit = tighter(limit, read_limit(name));
        if (strlen(dir) <= base_len) return limit;
        *strrchr(dir + base_len, '/') = '\0'; /* path starts with '/' */
    }
}

/* "memory" among a v1 line's comma-separated controllers. */
static bool has_memory_controller(const char *controllers, size_t len) {
    for (const char *c = controllers; c < controllers + len;) {
        const size_t n = strcspn(c, ",:");
        if (n == 6 && strncmp(c, "memory", 6) == 0) return true;
        c += n + 1;
    }
    return false;
}

/* One line of /proc/self/cgroup, "ID:CONTROLLERS:PATH": its memory limit, if its hierarchy has one. */
static size_t line_limit(const char *root, const char *line) {
    const char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
    if (!p || p[1] != '/') return 0;
    const char *path = strcmp(p + 1, "/") == 0 ? "" : p + 1;
    char base[4096];
    if (p == c + 1) { /* v2: one hierarchy, mounted alone or beside v1 ("unified") */
        snprintf(base, sizeof base, "%s/sys/fs/cgroup", root);
        const size_t alone = limit_along(base, path, "memory.max");
        snprintf(base, sizeof base, "%s/sys/fs/cgroup/unified", root);
        return tighter(alone, limit_along(base, path, "memory.max"));
    }
    if (!has_memory_controller(c + 1, (size_t)(p - c - 1))) return 0;
    snprintf(base, sizeof base, "%s/sys/fs/cgroup/memory", root);
    return limit_along(base, path, "memory.limit_in_bytes");
}

size_t machine_cgroup_limit(const char *root) {
    const char *prefix = strcmp(root, "/") == 0 ? "" : root; /* paths below are absolute */
    char line[4096];
    snprintf(line, sizeof line, "%s/proc/self/cgroup", prefix);
    FILE *f = fopen(line, "r");
    if (!f) return 0;
    size_t limit = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        limit = tighter(limit, line_limit(prefix, line));
    }
    fclose(f);
    return limit;
}

void snug_machine_memory_get(snug_machine_memory *m) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t physical = 0;
    if (pages > 0 && page > 0 && !size_mul((size_t)pages, (size_t)page, &physical)) physical = SIZE_MAX;
    m->physical = physical;
    m->cgroup = machine_cgroup_limit("/");
    m->usable = tighter(m->physical, m->cgroup);
}

/* "VmRSS:\t  7168 kB" lines of /proc/self/status. */
bool snug_process_resident(size_t *now, size_t *peak) {
    size_t kib[2] = {0, 0};
    int found = 0;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "VmRSS: %llu kB", &v) == 1) kib[0] = (size_t)v, found |= 1;
        if (sscanf(line, "VmHWM: %llu kB", &v) == 1) kib[1] = (size_t)v, found |= 2;
    }
    if (f) fclose(f);
    if (found != 3) kib[0] = kib[1] = 0;
    if (now) *now = kib[0] << 10;
    if (peak) *peak = kib[1] << 10;
    return found == 3;
}

char *snug_format_resident_peak(size_t program, char *buf, size_t len) {
    size_t peak;
    char all[32], fixed[32], within[32];
    if (!snug_process_resident(NULL, &peak) || peak < program) return NULL;
    snprintf(buf, len, "resident peak: %s, the program's %s and %s within the budget",
             snug_format_bytes(peak, all, sizeof all), snug_format_bytes(program, fixed, sizeof fixed),
             snug_format_bytes(peak - program, within, sizeof within));
    return buf;
}
