/* The memory timeline of `snug plan --timeline`: bytes in use per category over the schedule of one optimizer
 * step (forward, backward with recompute, update), for the chosen plan and for the same micro-batch without
 * checkpointing. Written as an SVG picture (timeline_svg.c) or a CSV table (timeline_csv.c), atomically
 * (timeline.c). */
#ifndef SNUG_CLI_TIMELINE_H
#define SNUG_CLI_TIMELINE_H

#include <stdio.h>

#include "snug.h"

typedef enum cli_timeline_format {
    CLI_TIMELINE_UNKNOWN = 0,
    CLI_TIMELINE_SVG,
    CLI_TIMELINE_CSV,
} cli_timeline_format;

/* The format a path asks for by its extension (".svg", ".csv", any letter case), or CLI_TIMELINE_UNKNOWN. */
cli_timeline_format cli_timeline_format_of(const char *path);

typedef struct cli_timeline_plan {
    const char *name;         /* "checkpointed" or "baseline": the CSV's plan column */
    const snug_plan *plan;    /* owned by the caller; its step layer names must stay valid while writing */
    char policy[32];          /* as resolved, "sqrt", "every:4", "none" */
} cli_timeline_plan;

#define CLI_TIMELINE_PLANS 2

typedef struct cli_timeline {
    const char *model;
    size_t batch, micro_batch;
    size_t budget;            /* 0: none given */
    /* [0] the chosen plan, [1] the same micro-batch without checkpointing: same y scale in the picture */
    cli_timeline_plan plans[CLI_TIMELINE_PLANS];
} cli_timeline;

/* Writes t to path in the format of its extension: into path.tmp, flushed and fsync'ed, then renamed over path,
 * so a reader never sees half a file. On failure path.tmp is removed and err names the path and the cause. */
snug_status cli_timeline_write(const cli_timeline *t, const char *path, snug_error *err);

/* The writers; both return 0, or -1 when a write to out failed (errno set). */
int cli_timeline_svg(const cli_timeline *t, FILE *out);
int cli_timeline_csv(const cli_timeline *t, FILE *out);

#endif
