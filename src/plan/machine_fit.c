/* Whether a plan can be reserved on this machine (snug_plan_check_machine): its total against the memory the
 * machine offers, and when it is over, the way out that can work. A budget is a ceiling the caller chose, the
 * machine's memory one it did not: the parameters, gradients and optimizer state do not shrink with the
 * micro-batch, so over the machine they call for a smaller model or a leaner optimizer, not a smaller batch. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "core/error.h"

/* "params 50.00 GiB, grads 50.00 GiB, ...": every category, in the unit of the total. */
static void format_categories(const size_t bytes[SNUG_MEM_NCATEGORIES], size_t total, char *buf, size_t len) {
    const bool gib = total >= (size_t)1 << 30;
    const double unit = gib ? (double)(1 << 30) : (double)(1 << 20);
    int n = 0;
    for (int c = 0; c < SNUG_MEM_NCATEGORIES && n >= 0 && (size_t)n < len; c++)
        n += snprintf(buf + n, len - (size_t)n, "%s%s %.2f", c ? ", " : "",
                      snug_mem_category_name((snug_mem_category)c), (double)bytes[c] / unit);
    if (n >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " %s", gib ? "GiB" : "MiB");
}

/* "the 23.51 GiB of physical memory of this machine", or the control group's limit where it is the lower. */
static void format_machine(const snug_machine_memory *m, char *buf, size_t len) {
    char usable[32], physical[32];
    snug_format_bytes(m->usable, usable, sizeof usable);
    if (m->cgroup && m->cgroup == m->usable && m->physical > m->cgroup)
        snprintf(buf, len, "the %s this process's control group allows (of %s of physical memory)", usable,
                 snug_format_bytes(m->physical, physical, sizeof physical));
    else if (m->cgroup && m->cgroup == m->usable)
        snprintf(buf, len, "the %s this process's control group allows", usable);
    else snprintf(buf, len, "the %s of physical memory of this machine", usable);
}

/* Over the machine with the parameters, gradients and optimizer state alone: what they need, and whether
 * dropping the optimizer's state would do. */
static void advise_fixed(const snug_plan_summary *s, size_t fixed, size_t usable, snug_error *err) {
    char need[32], model[32];
    const size_t optim = s->bytes[SNUG_MEM_OPTIM], model_bytes = fixed - optim;
    snug_error_append(err, " The parameters, gradients and optimizer state alone need %s, and no smaller "
                      "micro-batch or checkpointing lowers them:", snug_format_bytes(fixed, need, sizeof need));
    if (optim > 0 && model_bytes < usable)
        snug_error_append(err, " train with an optimizer that keeps less state (SGD without momentum keeps none, "
                          "with momentum 1x the parameters, AdamW 2x), or a smaller model.");
    else
        snug_error_append(err, " train a smaller model (its parameters and their gradients take %s).",
                          snug_format_bytes(model_bytes, model, sizeof model));
}

snug_status snug_plan_check_machine(const snug_plan *p, const snug_machine_memory *m, snug_error *err) {
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    if (m->usable == 0 || s.total <= m->usable) return SNUG_OK;
    char need[32], rest[32], fixed_text[32], usable[32], machine[160], breakdown[256];
    /* what the micro-batch does not change: the optional blocks (pending rows, kept weights) are the budget's */
    const size_t fixed = s.bytes[SNUG_MEM_PARAMS] - s.kept_bytes + s.bytes[SNUG_MEM_GRADS] - s.pending_bytes +
                         s.bytes[SNUG_MEM_OPTIM];
    format_categories(s.bytes, s.total, breakdown, sizeof breakdown);
    format_machine(m, machine, sizeof machine);
    snug_fail(err, SNUG_E_OOM, "out of memory: this plan needs %s (%s), more than %s.",
              snug_format_bytes(s.total, need, sizeof need), breakdown, machine);
    if (fixed >= m->usable) {
        advise_fixed(&s, fixed, m->usable, err);
        return SNUG_E_OOM;
    }
    snug_error_append(err, " Its parameters, gradients and optimizer state take %s; the rest, %s of activations, "
                      "workspace and data at micro-batch %zu, shrinks with a smaller micro-batch or checkpointing: "
                      "plan for a budget of at most %s.", snug_format_bytes(fixed, fixed_text, sizeof fixed_text),
                      snug_format_bytes(s.total - fixed, rest, sizeof rest), s.micro_batch,
                      snug_format_bytes(m->usable, usable, sizeof usable));
    return SNUG_E_OOM;
}
