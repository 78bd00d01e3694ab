/* The text report of `snug plan`: the table of candidate plans with the chosen row marked '*', a summary of the
 * chosen plan against its budget and against the same micro-batch without checkpointing, and (--layers) every
 * buffer of the chosen plan. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "cli/plan_report.h"

#define BYTES_W 11  /* "1023.99 MiB" */
#define PEAK_W 26

static void print_bytes_cell(FILE *out, size_t bytes) {
    char buf[32];
    fprintf(out, " %*s", BYTES_W, snug_format_bytes(bytes, buf, sizeof buf));
}

/* The policy column fits its longest label ("auto: every:12 selective"). */
static int policy_width(const plan_report *r) {
    int w = (int)strlen("checkpoint");
    for (size_t i = 0; i < r->n_rows; i++) {
        char label[64];
        int n = (int)strlen(plan_policy_label(r->rows[i].requested, &r->rows[i].s, label, sizeof label));
        if (n > w) w = n;
    }
    return w;
}

static void print_header(FILE *out, const plan_report *r, int pw) {
    const snug_train_config *c = r->cfg;
    char budget[32];
    fprintf(out, "plans for model %s, batch %zu, optimizer %s", r->model, c->batch,
            c->optim.kind == SNUG_OPTIM_ADAMW ? "adamw" : "sgd");
    if (c->optim.kind == SNUG_OPTIM_SGD) fprintf(out, " (momentum %g)", c->optim.momentum);
    fprintf(out, ", workspace for %d thread%s, budget %s:\n", r->threads, r->threads == 1 ? "" : "s",
            c->mem_budget ? snug_format_bytes(c->mem_budget, budget, sizeof budget) : "none");
    fprintf(out, "  %6s %6s  %-*s", "m", "k", pw, "checkpoint");
    for (int i = 0; i < SNUG_MEM_NCATEGORIES; i++)
        fprintf(out, " %*s", BYTES_W, snug_mem_category_name((snug_mem_category)i));
    fprintf(out, " %*s  %-*s %9s  %s\n", BYTES_W, "total", PEAK_W, "activation peak at", "recompute", "fits");
}

static void print_row(FILE *out, const plan_report *r, const plan_row *row, int pw) {
    char policy[64], peak[128];
    fprintf(out, "%c %6zu %6zu  %-*s", row->chosen ? '*' : ' ', row->m, row->k, pw,
            plan_policy_label(row->requested, &row->s, policy, sizeof policy));
    for (int i = 0; i < SNUG_MEM_NCATEGORIES; i++) print_bytes_cell(out, row->s.bytes[i]);
    print_bytes_cell(out, row->s.total);
    snprintf(peak, sizeof peak, "%s %s", row->s.peak_op ? row->s.peak_op : "-", snug_phase_name(row->s.peak_phase));
    fprintf(out, "  %-*s %8.1f%%  %s\n", PEAK_W, peak, plan_recompute_percent(&row->s),
            r->cfg->mem_budget ? (row->fits ? "yes" : "no") : "-");
}

void plan_print_table(FILE *out, const plan_report *r) {
    int pw = policy_width(r);
    print_header(out, r, pw);
    for (size_t i = 0; i < r->n_rows; i++) print_row(out, r, &r->rows[i], pw);
}

/* "8 micro-batches of 32" or "3 micro-batches of 22 (the last one 20)" */
static void print_split(FILE *out, size_t batch, size_t m, size_t k) {
    if (k == 1) {
        fprintf(out, "one pass of %zu per step (no accumulation)", batch);
        return;
    }
    fprintf(out, "%zu micro-batches of %zu", k, m);
    if (batch % m != 0) fprintf(out, " (the last one %zu)", batch % m);
    fprintf(out, " per step");
}

static void print_reserved(FILE *out, const plan_report *r, const plan_row *c) {
    char buf[32], budget[32];
    fprintf(out, "  reserved %s", snug_format_bytes(c->s.total, buf, sizeof buf));
    size_t b = r->cfg->mem_budget;
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
            fprintf(out, " (%s of transformed weights kept across a window)",
                    snug_format_bytes(c->s.kept_bytes, budget, sizeof budget));
    }
    fprintf(out, "\n");
}

static void print_against_baseline(FILE *out, const plan_report *r, const plan_row *c) {
    char buf[32], saved[32];
    if (c->s.segments == 0 || !r->baseline) return;
    const snug_plan_summary *b = &r->baseline_s;
    fprintf(out, "  without checkpointing at m = %zu: %s reserved", c->m, snug_format_bytes(b->total, buf, sizeof buf));
    if (r->cfg->mem_budget && b->total > r->cfg->mem_budget) fprintf(out, " (over the budget)");
    if (b->total > c->s.total)
        fprintf(out, "; checkpointing saves %s", snug_format_bytes(b->total - c->s.total, saved, sizeof saved));
    fprintf(out, "\n");
}

void plan_print_summary(FILE *out, const plan_report *r) {
    const plan_row *c = &r->rows[r->chosen];
    char policy[64], resolved[48], arena[32], live[32], buf_comm[32], regen[32];
    fprintf(out, "\nchosen plan (*): micro-batch %zu, ", c->m);
    print_split(out, r->cfg->batch, c->m, c->k);
    fprintf(out, ", checkpoint %s (%s)\n", plan_policy_label(c->requested, &c->s, policy, sizeof policy),
            r->auto_chosen ? "the best fit for the budget, as `snug train --mem` chooses"
                           : "as given by --micro-batch and --checkpoint");
    print_reserved(out, r, c);
    fprintf(out, "  communication: under mpirun, all-reduce in place on the gradients: no extra buffer (%s summed "
                 "over the ranks once per optimizer step); the plan and --mem are per rank\n",
            snug_format_bytes(c->s.bytes[SNUG_MEM_GRADS], buf_comm, sizeof buf_comm));
    fprintf(out, "  activations: arena %s, live peak %s at %s %s\n",
            snug_format_bytes(c->s.activation_peak, arena, sizeof arena),
            snug_format_bytes(c->s.live_peak, live, sizeof live), c->s.peak_op ? c->s.peak_op : "-",
            snug_phase_name(c->s.peak_phase));
    if (c->s.segments > 0)
        fprintf(out, "  recompute: %s in %zu segment%s, %.1f%% of the FLOPs of each micro-batch\n",
                plan_resolved_label(&c->s, resolved, sizeof resolved), c->s.segments,
                c->s.segments == 1 ? "" : "s", plan_recompute_percent(&c->s));
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
    print_against_baseline(out, r, c);
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

void plan_print_layers(FILE *out, const plan_report *r) {
    const plan_row *c = &r->rows[r->chosen];
    size_t n = snug_plan_buffer_count(c->plan);
    int lw = max_width(c->plan, n, true, 5), ww = max_width(c->plan, n, false, 4);
    fprintf(out, "\nbuffers of the chosen plan (%zu; offsets within the activation arena, lifetimes in schedule "
                 "steps 0..%zu):\n", n, snug_plan_step_count(c->plan) - 1);
    fprintf(out, "  %-*s  %-*s  %-11s %*s %12s  %-9s  %s\n", lw, "layer", ww, "what", "category", BYTES_W,
            "bytes", "offset", "steps", "memory");
    for (size_t i = 0; i < n; i++) {
        snug_plan_buffer_info b;
        snug_plan_buffer(c->plan, i, &b);
        char buf[32], steps[48];
        snprintf(steps, sizeof steps, "%zu..%zu", b.first_step, b.last_step);
        fprintf(out, "  %-*s  %-*s  %-11s %*s %12zu  %-9s  %s\n", lw, b.layer ? b.layer : "-", ww,
                b.what ? b.what : "-", snug_mem_category_name(b.category), BYTES_W,
                snug_format_bytes(b.bytes, buf, sizeof buf), b.offset, steps,
                b.in_place ? "in place (shares its input's)" : "own");
    }
}
