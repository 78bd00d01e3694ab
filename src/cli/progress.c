/* The live progress line, the log lines, and the skipped-step reports of a training run. */
#define _POSIX_C_SOURCE 200809L
#include "cli/progress.h"

#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)
#define LIVE_REDRAW_S 0.1  /* a terminal redrawn every millisecond step would cost more than the step */
#define AUTO_LINES_PER_EPOCH 20

void cli_progress_init(cli_progress *p, FILE *out, bool live, long log_every, long epochs) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->live = live;
    p->log_every = log_every;
    p->epochs = epochs;
    p->epoch_at = -1;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "mem 25.1/64.0 MiB (peak 25.1)", or without "/budget" when unlimited. */
static void format_memory(const cli_progress *p, bool compact, char *buf, size_t len) {
    buf[0] = '\0';
    if (!p->tr) return;
    snug_mem_report rep;
    snug_trainer_memory(p->tr, &rep);
    char budget[32] = "";
    if (rep.budget) snprintf(budget, sizeof budget, "/%.1f", rep.budget / MIB);
    if (compact) snprintf(buf, len, "  mem %.1f%s MiB", rep.total / MIB, budget);
    else snprintf(buf, len, "  mem %.1f%s MiB (peak %.1f)", rep.total / MIB, budget, rep.peak / MIB);
}

static void format_eta(const snug_step_stats *st, char *buf, size_t len) {
    if (st->step <= st->first_step) { snprintf(buf, len, "-"); return; }
    double per_step = st->process_s / (double)(st->step - st->first_step);
    snug_format_duration(per_step * (double)(st->total_steps - st->step), buf, len);
}

/* The fields both displays share: epoch, step, loss, speed, memory, ETA. The compact form, for a narrow
 * terminal, drops the epoch and the peak and shortens the speed. */
static void format_fields(const cli_progress *p, const snug_step_stats *st, bool compact, char *buf,
                          size_t len) {
    char speed[32], mem[96], eta[32];
    snug_format_count(st->samples_per_s, speed, sizeof speed);
    format_memory(p, compact, mem, sizeof mem);
    format_eta(st, eta, sizeof eta);
    if (compact)
        snprintf(buf, len, "step %ld/%ld  loss %.4f  %s/s%s  ETA %s", st->step, st->total_steps, st->loss, speed,
                 mem, eta);
    else
        snprintf(buf, len, "epoch %ld/%ld  step %ld/%ld  loss %.4f  %s samples/s%s  ETA %s", st->epoch + 1,
                 p->epochs, st->step, st->total_steps, st->loss, speed, mem, eta);
}

static long auto_log_every(const snug_step_stats *st) {
    long span = st->steps_per_epoch < st->total_steps ? st->steps_per_epoch : st->total_steps;
    return span / AUTO_LINES_PER_EPOCH > 1 ? span / AUTO_LINES_PER_EPOCH : 1;
}

/* Columns of the terminal behind out, or 0 when unknown. */
static size_t terminal_columns(FILE *out) {
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) != 0) return 0;
    return ws.ws_col;
}

/* A line longer than the terminal wraps, and '\r' then rewrites only its last row: use the compact form, and
 * cut even that to fit. */
static void draw_live(cli_progress *p, const snug_step_stats *st, bool last) {
    if (!last && p->line_open && st->elapsed_s - p->last_draw_s < LIVE_REDRAW_S) return;
    char line[256];
    size_t cols = terminal_columns(p->out);
    format_fields(p, st, false, line, sizeof line);
    if (cols > 1 && strlen(line) >= cols) {
        format_fields(p, st, true, line, sizeof line);
        if (strlen(line) >= cols) line[cols - 1] = '\0';
    }
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
    p->line_open = true;
    p->last_draw_s = st->elapsed_s;
}

static void write_log(cli_progress *p, const snug_step_stats *st, bool last) {
    if (p->log_every == 0) p->log_every = auto_log_every(st);
    if (!last && st->step % p->log_every != 0) return;
    char line[256], elapsed[32];
    format_fields(p, st, false, line, sizeof line);
    fprintf(p->out, "%s  elapsed %s\n", line, snug_format_duration(st->elapsed_s, elapsed, sizeof elapsed));
    fflush(p->out);
}

/* A skipped step goes to stderr at once, on its own line (clearing a live line first, which is redrawn at the
 * next step). */
static void report_skipped(cli_progress *p, const snug_step_stats *st) {
    if (p->line_open) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
        p->line_open = false;
    }
    fprintf(stderr,
            "snug: skipped a batch after optimizer step %ld (epoch %ld): the loss (%g) or the gradient norm (%g) "
            "is not finite; no update was made and the learning rate was held (%ld skipped so far)\n",
            st->step, st->epoch + 1, st->loss, (double)st->grad_norm, p->skipped);
}

/* The samples of the window just done: B, or what is left of the epoch (the trainer cuts windows so). Without
 * the sizes, the items (a sample each, for classification). */
static size_t window_samples(cli_progress *p, const snug_step_stats *st) {
    if (p->batch == 0 || p->dataset_samples == 0) return st->items;
    if (st->epoch != p->epoch_at) {
        p->epoch_at = st->epoch;
        p->window = 0;
    }
    size_t start = p->window++ * p->batch, left = p->dataset_samples > start ? p->dataset_samples - start : 0;
    return left < p->batch ? left : p->batch;
}

bool cli_progress_step(const snug_step_stats *st, void *user) {
    cli_progress *p = user;
    p->samples += window_samples(p, st);
    p->last = *st;
    p->any = true;
    if (st->skipped) {
        p->skipped++;
        report_skipped(p, st);
        return true;
    }
    bool last = st->step >= st->total_steps;
    if (p->live) draw_live(p, st, last);
    else write_log(p, st, last);
    return true;
}

void cli_print_eval(FILE *out, const snug_eval_result *res, const char *split) {
    char items[32];
    snug_format_count((double)res->items, items, sizeof items);
    if (res->kind == SNUG_EVAL_TOKENS) {
        bool bytes = res->classes == 256;  /* byte-level text: a token is a byte */
        const char *unit = bytes ? "byte" : "token";
        fprintf(out, "%s loss %.4f nats/%s (%.4f bits/%s), next-%s accuracy %.2f%% on %s %ss\n", split, res->loss,
                unit, res->bits, unit, unit, 100.0 * res->accuracy, items, unit);
    } else if (res->kind == SNUG_EVAL_PIXELS) {
        fprintf(out, "%s pixel accuracy %.2f%%, mean IoU %.4f", split, 100.0 * res->accuracy, res->mean_iou);
        if (res->classes == 2) fprintf(out, ", foreground IoU %.4f", res->foreground_iou);
        fprintf(out, " (loss %.4f) on %s pixels\n", res->loss, items);
    } else {
        fprintf(out, "%s accuracy %.2f%% (loss %.4f) on %s images\n", split, 100.0 * res->accuracy, res->loss, items);
    }
}

void cli_progress_log_failed(const char *message, void *user) {
    cli_progress *p = user;
    cli_progress_finish(p);
    p->log_failed = true;
    fprintf(stderr, "snug: warning: %s\n", message);
}

void cli_progress_finish(cli_progress *p) {
    if (p->line_open) {
        fputc('\n', p->out);
        fflush(p->out);
        p->line_open = false;
    }
}
