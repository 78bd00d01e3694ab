/* Choosing the timeline's format by extension, and writing the file atomically (core/atomic_file.h), so an
 * interrupted run never leaves half a file behind under the name a reader asked for. */
#define _POSIX_C_SOURCE 200809L
#include "report/timeline.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "report/plan_labels.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcasecmp(s + n - k, suffix) == 0;
}

plan_timeline_format plan_timeline_format_of(const char *path) {
    if (!path) return PLAN_TIMELINE_UNKNOWN;
    if (ends_with(path, ".svg")) return PLAN_TIMELINE_SVG;
    if (ends_with(path, ".csv")) return PLAN_TIMELINE_CSV;
    return PLAN_TIMELINE_UNKNOWN;
}

typedef struct timeline_job {
    const plan_timeline *t;
    plan_timeline_format format;
} timeline_job;

static snug_status fill(FILE *f, void *user, snug_error *err) {
    const timeline_job *job = user;
    int rc = job->format == PLAN_TIMELINE_SVG ? plan_timeline_svg(job->t, f) : plan_timeline_csv(job->t, f);
    if (rc == 0 || ferror(f)) return SNUG_OK; /* a refused write is found through ferror */
    return snug_fail(err, SNUG_E_OOM, "timeline: no memory for the steps of a plan");
}

/* Writes t to path in the format of its extension, atomically (core/atomic_file.h). */
static snug_status write_atomically(const plan_timeline *t, const char *path, snug_error *err) {
    timeline_job job = {.t = t, .format = plan_timeline_format_of(path)};
    if (job.format == PLAN_TIMELINE_UNKNOWN)
        return snug_fail(err, SNUG_E_ARG, "timeline '%s': the name must end in .svg or .csv", path);
    return atomic_file_write(path, NULL, "timeline", fill, &job, err);
}

snug_status snug_plan_timeline_write(const snug_plan *plan, const snug_plan *baseline, const char *title,
                                     const char *path, snug_error *err) {
    if (!plan || !baseline || !path)
        return snug_fail(err, SNUG_E_ARG, "timeline: a plan, its baseline and a path are needed");
    snug_plan_summary s, b;
    snug_plan_summarize(plan, &s);
    snug_plan_summarize(baseline, &b);
    plan_timeline t = {.model = title ? title : "model", .batch = s.batch, .micro_batch = s.micro_batch,
                       .budget = s.budget};
    t.plans[0] = (plan_timeline_plan){.name = "checkpointed", .plan = plan};
    t.plans[1] = (plan_timeline_plan){.name = "baseline", .plan = baseline};
    plan_resolved_label(&s, t.plans[0].policy, sizeof t.plans[0].policy);
    plan_resolved_label(&b, t.plans[1].policy, sizeof t.plans[1].policy);
    return write_atomically(&t, path, err);
}
