/* The memory timeline (snug_plan_timeline_write): bytes in use per category over the schedule of one optimizer
 * step (forward, backward with recompute, update), for a plan and for a baseline (the same micro-batch without
 * checkpointing). Written as an SVG picture (timeline_svg.c) or a CSV table (timeline_csv.c), atomically
 * (timeline.c). */
#ifndef SNUG_REPORT_TIMELINE_H
#define SNUG_REPORT_TIMELINE_H

#include <stdio.h>

#include "snug.h"

typedef enum plan_timeline_format {
    PLAN_TIMELINE_UNKNOWN = 0,
    PLAN_TIMELINE_SVG,
    PLAN_TIMELINE_CSV,
} plan_timeline_format;

/* The format a path asks for by its extension (".svg", ".csv", any letter case), or PLAN_TIMELINE_UNKNOWN. */
plan_timeline_format plan_timeline_format_of(const char *path);

typedef struct plan_timeline_plan {
    const char *name;         /* "checkpointed" or "baseline": the CSV's plan column */
    const snug_plan *plan;    /* owned by the caller; its step layer names must stay valid while writing */
    char policy[48];          /* as resolved, "sqrt", "every:4", "none" */
} plan_timeline_plan;

#define PLAN_TIMELINE_PLANS 2

typedef struct plan_timeline {
    const char *model;
    size_t batch, micro_batch;
    size_t budget;            /* 0: none given */
    /* [0] the chosen plan, [1] the same micro-batch without checkpointing: same y scale in the picture */
    plan_timeline_plan plans[PLAN_TIMELINE_PLANS];
} plan_timeline;

/* The writers; both return 0, or -1 when a write to out failed (errno set). */
int plan_timeline_svg(const plan_timeline *t, FILE *out);
int plan_timeline_csv(const plan_timeline *t, FILE *out);

#endif
