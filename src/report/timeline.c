/* Choosing the timeline's format by extension, and writing the file atomically: the picture or table goes to
 * PATH.tmp, is flushed to disk, then renamed over PATH, so an interrupted run never leaves half a file behind
 * under the name a reader asked for. */
#define _POSIX_C_SOURCE 200809L
#include "report/timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/error.h"

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

/* Writes the content, flushes it and syncs it; on failure returns errno of the first failing call. */
static int write_synced(const plan_timeline *t, plan_timeline_format format, FILE *f) {
    int rc = format == PLAN_TIMELINE_SVG ? plan_timeline_svg(t, f) : plan_timeline_csv(t, f);
    if (rc != 0 || fflush(f) != 0 || ferror(f)) return errno ? errno : EIO;
    if (fsync(fileno(f)) != 0) return errno;
    return 0;
}

/* Writes t to path in the format of its extension: into path.tmp, flushed and fsync'ed, then renamed over path,
 * so a reader never sees half a file. On failure path.tmp is removed and err names the path and the cause. */
static snug_status write_atomically(const plan_timeline *t, const char *path, snug_error *err) {
    plan_timeline_format format = plan_timeline_format_of(path);
    if (format == PLAN_TIMELINE_UNKNOWN)
        return snug_fail(err, SNUG_E_ARG, "timeline '%s': the name must end in .svg or .csv", path);
    size_t n = strlen(path) + sizeof ".tmp";
    char *tmp = malloc(n);
    if (!tmp) return snug_fail(err, SNUG_E_OOM, "timeline '%s': no memory for the file name", path);
    snprintf(tmp, n, "%s.tmp", path);

    errno = 0;
    FILE *f = fopen(tmp, "w");
    int e = f ? write_synced(t, format, f) : errno;
    if (f && fclose(f) != 0 && e == 0) e = errno ? errno : EIO;
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    snug_status st = SNUG_OK;
    if (e != 0) {
        st = snug_fail(err, SNUG_E_IO, "cannot write the timeline '%s': %s (check that its folder exists and is "
                       "writable)", path, strerror(e));
        remove(tmp);
    }
    free(tmp);
    return st;
}

/* "sqrt", "every:3 selective": the policy a plan resolved to. */
static void resolved_label(const snug_plan_summary *s, char *buf, size_t len) {
    char policy[24];
    snug_format_checkpoint(s->policy, policy, sizeof policy);
    snprintf(buf, len, "%s%s", policy, s->selective && s->policy.kind != SNUG_CHECKPOINT_CHEAP ? " selective" : "");
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
    resolved_label(&s, t.plans[0].policy, sizeof t.plans[0].policy);
    resolved_label(&b, t.plans[1].policy, sizeof t.plans[1].policy);
    return write_atomically(&t, path, err);
}
