/* The budgeted allocator: every byte the engine holds is tagged with a category and counted against one
 * budget. Memory is reserved before the first step and released all at once; a step allocates nothing. */
#ifndef SNUG_CORE_MEM_H
#define SNUG_CORE_MEM_H

#include "snug.h"

#define SNUG_MEM_ALIGN 64

typedef struct snug_mem_block snug_mem_block;

typedef struct snug_mem {
    size_t budget;                          /* 0: unlimited */
    size_t in_use[SNUG_MEM_NCATEGORIES];
    size_t total;
    size_t peak;
    snug_mem_block *blocks;                 /* every live allocation, newest first */
} snug_mem;

void snug_mem_init(snug_mem *mem, size_t budget);

/* Returns zeroed memory aligned to SNUG_MEM_ALIGN, counted under `cat`. `owner` names the buffer for messages
 * ("conv2"). Over budget: NULL, and err says
 *   "out of memory: conv2 activations need 44.00 MiB more (budget 256.00 MiB; in use 230.1 MiB: params 1.6,
 *    grads 1.6, optim 1.6, activations 212.0, workspace 9.3, data 4.0)." */
void *snug_mem_alloc(snug_mem *mem, snug_mem_category cat, size_t bytes, const char *owner, snug_error *err);

/* Counts bytes held elsewhere (what the data sets keep: their own allocations) under `cat` without allocating
 * them, so that the budget and the report cover them; false and err over budget, as snug_mem_alloc. */
bool snug_mem_hold(snug_mem *mem, snug_mem_category cat, size_t bytes, const char *owner, snug_error *err);

/* Frees every allocation; the counters go to zero, the peak stays. */
void snug_mem_release_all(snug_mem *mem);

void snug_mem_report_get(const snug_mem *mem, snug_mem_report *rep);

/* "in use 230.1 MiB: params 1.6, grads 1.6, ..." for messages and the end-of-run report. */
void snug_mem_format_breakdown(const size_t in_use[SNUG_MEM_NCATEGORIES], char *buf, size_t len);

#endif
