/* The text report of a plan set (snug_plan_set_print, as `snug plan` prints it): the table of candidate plans
 * with the chosen row marked '*', a summary of the chosen plan against its budget, the machine and the same
 * micro-batch without checkpointing, and on request every buffer of the chosen plan. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "core/error.h"
#include "report/plan_labels.h"

#define BYTES_W 11  /* "1023.99 MiB" */
#define PEAK_W 38

static void print_bytes_cell(FILE *out, size_t bytes) {
    char buf[32];
    fprintf(out, " %*s", BYTES_W, snug_format_bytes(bytes, buf, sizeof buf));
}

/* One row of the table: a plan, its figures, and whether it fits. */
typedef struct plan_row {
    const snug_plan *plan;
    snug_plan_summary s;
    bool fits, chosen;
} plan_row;

static plan_row row_at(const snug_plan_set *set, size_t i) {
    plan_row r = {.plan = snug_plan_set_at(set, i), .chosen = i == snug_plan_set_chosen(set)};
    snug_plan_summarize(r.plan, &r.s);
    r.fits = r.s.budget > 0 && r.s.total <= r.s.budget;
    return r;
}

/* The policy column fits its longest label ("auto: every:12 selective"). */
static int policy_width(const snug_plan_set *set) {
    int w = (int)strlen("checkpoint");
    for (size_t i = 0; i < snug_plan_set_count(set); i++) {
        char label[64];
        const plan_row row = row_at(set, i);
        int n = (int)strlen(snug_plan_policy_label(&row.s, label, sizeof label));
        if (n > w) w = n;
    }
    return w;
}

static void print_header(FILE *out, const snug_plan_set *set, const char *model, int pw) {
    const snug_plan_request *c = snug_plan_request_of(snug_plan_set_at(set, 0));
    const snug_optim_config optim = c->optim;
    char budget[32];
    fprintf(out, "plans for model %s, batch %zu, precision %s, optimizer %s", model, c->batch,
            snug_precision_name(c->precision), optim.kind == SNUG_OPTIM_ADAMW ? "adamw" : "sgd");
    if (optim.kind == SNUG_OPTIM_SGD) fprintf(out, " (momentum %g)", optim.momentum);
    fprintf(out, ", workspace for %d thread%s, budget %s:\n", c->threads, c->threads == 1 ? "" : "s",
            c->budget ? snug_format_bytes(c->budget, budget, sizeof budget) : "none");
    fprintf(out, "  %6s %6s  %-*s", "m", "k", pw, "checkpoint");
    for (int i = 0; i < SNUG_MEM_NCATEGORIES; i++)
        fprintf(out, " %*s", BYTES_W, snug_mem_category_name((snug_mem_category)i));
    fprintf(out, " %*s  %-*s %9s  %s\n", BYTES_W, "total", PEAK_W, "peak in use at", "recompute", "fits");
}

static void print_row(FILE *out, const plan_row *row, int pw) {
    char policy[64], peak[128], bytes[32];
    fprintf(out, "%c %6zu %6zu  %-*s", row->chosen ? '*' : ' ', row->s.micro_batch, row->s.micro_batches, pw,
            snug_plan_policy_label(&row->s, policy, sizeof policy));
    for (int i = 0; i < SNUG_MEM_NCATEGORIES; i++) print_bytes_cell(out, row->s.bytes[i]);
    print_bytes_cell(out, row->s.total);
    snprintf(peak, sizeof peak, "%s %s %s", snug_format_bytes(row->s.peak, bytes, sizeof bytes),
             row->s.peak_op ? row->s.peak_op : "-", snug_phase_name(row->s.peak_phase));
    fprintf(out, "  %-*s %8.1f%%  %s\n", PEAK_W, peak, snug_plan_recompute_percent(&row->s),
            row->s.budget ? (row->fits ? "yes" : "no") : "-");
}

static void print_table(FILE *out, const snug_plan_set *set, const char *model) {
    int pw = policy_width(set);
    print_header(out, set, model, pw);
    for (size_t i = 0; i < snug_plan_set_count(set); i++) {
        const plan_row row = row_at(set, i);
        print_row(out, &row, pw);
    }
}

/* "8 micro-batches of 32" or "3 micro-batches of 22 (the last one 20)" */
static void print_split(FILE *out, const snug_plan_summary *s) {
    if (s->micro_batches == 1) {
        fprintf(out, "one pass of %zu per step (no accumulation)", s->share);
        return;
    }
    fprintf(out, "%zu micro-batches of %zu", s->micro_batches, s->micro_batch);
    if (s->last_micro_batch != s->micro_batch) fprintf(out, " (the last one %zu)", s->last_micro_batch);
    fprintf(out, " per step");
}

static void print_reserved(FILE *out, const plan_row *c) {
    char buf[32], budget[32];
    fprintf(out, "  reserved %s", snug_format_bytes(c->s.total, buf, sizeof buf));
    size_t b = c->s.budget;
    if (b)
        fprintf(out, " of the %s budget (%.1f%%%s)", snug_format_bytes(b, budget, sizeof budget),
                100.0 * (double)c->s.total / (double)b, c->fits ? "" : ": OVER the budget");
    fprintf(out, ":");
    for (int i = 0; i < SNUG_MEM_NCATEGORIES; i++) {
        fprintf(out, "%s %s %s", i ? "," : "", snug_mem_category_name((snug_mem_category)i),
                snug_format_bytes(c->s.bytes[i], buf, sizeof buf));
        if (i == SNUG_MEM_GRADS && c->s.pending_bytes)
            fprintf(out, " (%s of pending rows: dW updated 16 samples at a time)",
                    snug_format_bytes(c->s.pending_bytes, budget, sizeof budget));
        if (i == SNUG_MEM_PARAMS && c->s.kept_bytes)
            fprintf(out, " (%s of weights kept across a window: transformed, or bf16 copies)",
                    snug_format_bytes(c->s.kept_bytes, budget, sizeof budget));
    }
    fprintf(out, "\n");
}

static void print_against_baseline(FILE *out, const snug_plan_set *set, const plan_row *c) {
    char buf[32], saved[32];
    if (c->s.segments == 0) return;
    snug_plan_summary base;
    snug_plan_summarize(snug_plan_set_baseline(set), &base);
    const snug_plan_summary *b = &base;
    fprintf(out, "  without checkpointing at m = %zu: %s reserved", c->s.micro_batch,
            snug_format_bytes(b->total, buf, sizeof buf));
    if (c->s.budget && b->total > c->s.budget) fprintf(out, " (over the budget)");
    if (b->total > c->s.total)
        fprintf(out, "; checkpointing saves %s", snug_format_bytes(b->total - c->s.total, saved, sizeof saved));
    fprintf(out, "\n");
}

static void print_summary(FILE *out, const snug_plan_set *set) {
    const plan_row row = row_at(set, snug_plan_set_chosen(set)), *c = &row;
    char policy[64], resolved[48], arena[32], live[32], buf_comm[32], regen[32], peak[32], total[32];
    fprintf(out, "\nchosen plan (*): micro-batch %zu, ", c->s.micro_batch);
    print_split(out, &c->s);
    fprintf(out, ", checkpoint %s (%s)\n", snug_plan_policy_label(&c->s, policy, sizeof policy),
            c->s.micro_batch_chosen ? "the best fit for the budget, as training chooses it"
                                    : "the micro-batch and policy as requested");
    print_reserved(out, c);
    snug_machine_memory m;
    snug_error machine = {0};
    snug_machine_memory_get(&m);
    if (snug_plan_check_machine(c->plan, &m, &machine) != SNUG_OK)
        fprintf(out, "  machine: snug train would stop before its first step: %s\n", machine.message);
    fprintf(out, "  communication: under mpirun, all-reduce in place on the gradients: no extra buffer (%s summed "
                 "over the ranks once per optimizer step); the plan and its budget are per rank\n",
            snug_format_bytes(c->s.bytes[SNUG_MEM_GRADS], buf_comm, sizeof buf_comm));
    fprintf(out, "  peak in use: %s at %s %s (schedule step %zu, the timeline's peak), of the %s reserved\n",
            snug_format_bytes(c->s.peak, peak, sizeof peak), c->s.peak_op ? c->s.peak_op : "-",
            snug_phase_name(c->s.peak_phase), c->s.peak_step, snug_format_bytes(c->s.total, total, sizeof total));
    fprintf(out, "  activations: arena %s, at most %s live at one step\n",
            snug_format_bytes(c->s.activation_peak, arena, sizeof arena),
            snug_format_bytes(c->s.live_peak, live, sizeof live));
    if (c->s.segments > 0)
        fprintf(out, "  recompute: %s in %zu segment%s, %.1f%% of the FLOPs of each micro-batch\n",
                plan_resolved_label(&c->s, resolved, sizeof resolved), c->s.segments,
                c->s.segments == 1 ? "" : "s", snug_plan_recompute_percent(&c->s));
    else fprintf(out, "  recompute: none, every activation backward needs is kept%s\n",
                 c->s.regenerated_inputs ? " but the regenerated inputs below" : "");
    if (c->s.regenerated_inputs > 0)
        fprintf(out, "  regenerated: %zu input%s (%s) rebuilt sample by sample in backward from the "
                     "normalisation or GELU that made %s, instead of kept: the same bits, no replay pass\n",
                c->s.regenerated_inputs, c->s.regenerated_inputs == 1 ? "" : "s",
                snug_format_bytes(c->s.regenerated_bytes, regen, sizeof regen),
                c->s.regenerated_inputs == 1 ? "it" : "them");
    if (c->s.spared_segments > 0)
        fprintf(out, "  spared: %zu segment%s kept whole: recomputing %s would not lower the plan's total (the peak "
                     "lies elsewhere)\n",
                c->s.spared_segments, c->s.spared_segments == 1 ? "" : "s",
                c->s.spared_segments == 1 ? "it" : "them");
    print_against_baseline(out, set, c);
}

static int max_width(const snug_plan *p, size_t n, bool layer, int least) {
    int w = least;
    for (size_t i = 0; i < n; i++) {
        snug_plan_buffer_info b;
        snug_plan_buffer(p, i, &b);
        const char *s = layer ? b.layer : b.what;
        int len = s ? (int)strlen(s) : 1;
        if (len > w) w = len;
    }
    return w;
}

static void print_layers(FILE *out, const snug_plan_set *set) {
    const plan_row row = row_at(set, snug_plan_set_chosen(set)), *c = &row;
    size_t n = snug_plan_buffer_count(c->plan);
    int lw = max_width(c->plan, n, true, 5), ww = max_width(c->plan, n, false, 4);
    fprintf(out, "\nbuffers of the chosen plan (%zu; offsets within the activation arena, lifetimes in schedule "
                 "steps 0..%zu; then the blocks of the whole step and each step's workspace):\n", n, snug_plan_step_count(c->plan) - 1);
    fprintf(out, "  %-*s  %-*s  %-5s %-11s %*s %12s  %-9s  %s\n", lw, "layer", ww, "what", "dtype", "category",
            BYTES_W, "bytes", "offset", "steps", "memory");
    for (size_t i = 0; i < n; i++) {
        snug_plan_buffer_info b;
        snug_plan_buffer(c->plan, i, &b);
        char buf[32], steps[48];
        snprintf(steps, sizeof steps, "%zu..%zu", b.first_step, b.last_step);
        fprintf(out, "  %-*s  %-*s  %-5s %-11s %*s %12zu  %-9s  %s\n", lw, b.layer ? b.layer : "-", ww,
                b.what ? b.what : "-", b.dtype, snug_mem_category_name(b.category), BYTES_W,
                snug_format_bytes(b.bytes, buf, sizeof buf), b.offset, steps,
                b.in_place ? "in place (shares its input's)" : "own");
    }
}

snug_status snug_plan_set_print(FILE *out, const snug_plan_set *set, const char *title, bool buffers,
                                snug_error *err) {
    if (!out || !set) return snug_fail(err, SNUG_E_ARG, "printing a plan set: a stream and a set are needed");
    print_table(out, set, title ? title : "model");
    print_summary(out, set);
    if (buffers) print_layers(out, set);
    return ferror(out) ? snug_fail(err, SNUG_E_IO, "could not write the plan report (is the output closed?)")
                       : SNUG_OK;
}
