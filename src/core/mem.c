/* The budgeted allocator. Allocations are few and large (one per planned buffer), made before the first step,
 * so a list of blocks is all the bookkeeping needed. */
#include "core/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"

struct snug_mem_block {
    snug_mem_block *next;
    snug_mem_category cat;
    size_t bytes;
    void *ptr;
};

static const char *const category_names[SNUG_MEM_NCATEGORIES] = {
    "params", "grads", "optim", "activations", "workspace", "data",
};

const char *snug_mem_category_name(snug_mem_category c) {
    return (unsigned)c < SNUG_MEM_NCATEGORIES ? category_names[c] : "unknown";
}

void snug_mem_init(snug_mem *mem, size_t budget) {
    memset(mem, 0, sizeof *mem);
    mem->budget = budget;
}

void snug_mem_format_breakdown(const size_t in_use[SNUG_MEM_NCATEGORIES], char *buf, size_t len) {
    size_t total = 0;
    for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++) total += in_use[c];
    int n = snprintf(buf, len, "in use %.1f MiB:", (double)total / (1 << 20));
    for (int c = 0; c < SNUG_MEM_NCATEGORIES && n >= 0 && (size_t)n < len; c++)
        n += snprintf(buf + n, len - (size_t)n, "%s %s %.1f", c ? "," : "", category_names[c],
                      (double)in_use[c] / (1 << 20));
}

static snug_status over_budget(const snug_mem *mem, snug_mem_category cat, size_t bytes, const char *owner,
                               snug_error *err) {
    char need[32], budget[32], breakdown[256];
    size_t free_bytes = mem->budget > mem->total ? mem->budget - mem->total : 0;
    snug_format_bytes(bytes - free_bytes, need, sizeof need);
    snug_format_bytes(mem->budget, budget, sizeof budget);
    snug_mem_format_breakdown(mem->in_use, breakdown, sizeof breakdown);
    return snug_fail(err, SNUG_E_OOM, "out of memory: %s %s need %s more (budget %s; %s).", owner,
                     category_names[cat], need, budget, breakdown);
}

static bool too_large(snug_mem_category cat, const char *owner, snug_error *err) {
    snug_fail(err, SNUG_E_OVERFLOW, "out of memory: %s %s would need more than SIZE_MAX bytes.", owner,
              category_names[cat]);
    return false;
}

/* Whether `bytes` more fit the budget under `cat`: *total is what the total would become; else err says why. */
static bool room_for(const snug_mem *mem, snug_mem_category cat, size_t bytes, const char *owner, size_t *total,
                     snug_error *err) {
    if (!size_add(mem->total, bytes, total)) return too_large(cat, owner, err);
    if (mem->budget && *total > mem->budget) {
        over_budget(mem, cat, bytes, owner, err);
        return false;
    }
    return true;
}

static void count(snug_mem *mem, snug_mem_category cat, size_t bytes, size_t total) {
    mem->in_use[cat] += bytes;
    mem->total = total;
    if (total > mem->peak) mem->peak = total;
}

bool snug_mem_hold(snug_mem *mem, snug_mem_category cat, size_t bytes, const char *owner, snug_error *err) {
    size_t total;
    if (!room_for(mem, cat, bytes, owner, &total, err)) return false;
    count(mem, cat, bytes, total);
    return true;
}

void *snug_mem_alloc(snug_mem *mem, snug_mem_category cat, size_t bytes, const char *owner, snug_error *err) {
    size_t rounded, total;
    if (!size_align(bytes ? bytes : 1, SNUG_MEM_ALIGN, &rounded)) {
        too_large(cat, owner, err);
        return NULL;
    }
    if (!room_for(mem, cat, rounded, owner, &total, err)) return NULL;
    snug_mem_block *b = malloc(sizeof *b);
    void *ptr = aligned_alloc(SNUG_MEM_ALIGN, rounded);
    if (!b || !ptr) {
        free(b);
        free(ptr);
        char need[32];
        snug_fail(err, SNUG_E_OOM, "out of memory: the system refused %s for %s %s: plan for a smaller budget or micro-batch.",
                  snug_format_bytes(rounded, need, sizeof need), owner, category_names[cat]);
        return NULL;
    }
    memset(ptr, 0, rounded);
    *b = (snug_mem_block){.next = mem->blocks, .cat = cat, .bytes = rounded, .ptr = ptr};
    mem->blocks = b;
    count(mem, cat, rounded, total);
    return ptr;
}

void snug_mem_release_all(snug_mem *mem) {
    for (snug_mem_block *b = mem->blocks, *next; b; b = next) {
        next = b->next;
        free(b->ptr);
        free(b);
    }
    mem->blocks = NULL;
    memset(mem->in_use, 0, sizeof mem->in_use);
    mem->total = 0;
}

void snug_mem_report_get(const snug_mem *mem, snug_mem_report *rep) {
    rep->budget = mem->budget;
    memcpy(rep->in_use, mem->in_use, sizeof rep->in_use);
    rep->total = mem->total;
    rep->peak = mem->peak;
}
