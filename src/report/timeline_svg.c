/* The memory timeline as a picture: for each plan a panel of stacked areas, bytes live per category at every
 * step of one optimizer step's schedule, on one shared y scale so the two panels compare at a glance. Each panel
 * marks its peak (a line, its size and the layer and phase that reach it), the budget when there is one, shades
 * the recomputed steps, and labels the phases on a strip under the x axis. */
#define _POSIX_C_SOURCE 200809L
#include "report/timeline.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg.h"

#define MIB (1024.0 * 1024.0)

/* Page geometry, in SVG user units (pixels). */
#define WIDTH 1100.0
#define PLOT_LEFT 90.0
#define PLOT_RIGHT (WIDTH - 64.0)  /* room for a narrow last phase label ("update") beside the strip */
#define HEADER_H 110.0   /* title, subtitle, legend */
#define PANEL_H 360.0    /* panel title, plot, phase strip, x axis label */
#define PANEL_TITLE_H 34.0
#define PLOT_H 240.0
#define STRIP_H 18.0
#define FOOTER_H 20.0
#define CHAR_W 6.6       /* average width of a 12px sans-serif character, to decide whether a label fits */

/* Bottom to top: the fixed categories first, so the moving ones (activations above all) shape the outline. */
static const snug_mem_category stack_order[SNUG_MEM_NCATEGORIES] = {
    SNUG_MEM_PARAMS, SNUG_MEM_GRADS, SNUG_MEM_OPTIM, SNUG_MEM_DATA, SNUG_MEM_WORKSPACE, SNUG_MEM_ACTIVATIONS,
};

/* Indexed by snug_mem_category: six hues a colour-blind reader can still tell apart (Tableau 10). */
static const char *const category_colour[SNUG_MEM_NCATEGORIES] = {
    "#4e79a7", /* params: blue */
    "#76b7b2", /* grads: teal */
    "#b07aa1", /* optim: purple */
    "#e15759", /* activations: red */
    "#edc948", /* workspace: yellow */
    "#59a14f", /* data: green */
};

/* Indexed by snug_phase. */
static const char *const phase_colour[] = {"#c6dbef", "#fdae6b", "#dadaeb", "#c7e9c0"};

/* One plan's steps, read once, with the totals the picture needs. */
typedef struct panel_data {
    const plan_timeline_plan *tp;
    const char *title;       /* of the panel */
    snug_plan_step_info *steps;
    size_t n;
    size_t peak, peak_step;  /* the plan's peak and its step (snug_plan_summary's: the table names the same) */
    snug_plan_summary summary;
} panel_data;

static int load_panel(const plan_timeline_plan *tp, const char *title, panel_data *d) {
    memset(d, 0, sizeof *d);
    d->tp = tp;
    d->title = title;
    d->n = snug_plan_step_count(tp->plan);
    snug_plan_summarize(tp->plan, &d->summary);
    d->peak = d->summary.peak, d->peak_step = d->summary.peak_step;
    d->steps = calloc(d->n ? d->n : 1, sizeof *d->steps);
    if (!d->steps) return -1;
    for (size_t i = 0; i < d->n; i++) snug_plan_step(tp->plan, i, &d->steps[i]);
    return 0;
}

/* The coordinates of one panel: steps along x, MiB along y. */
typedef struct frame {
    double top;          /* of the plot area */
    double ybase_mib;    /* the bottom of the y axis: 0, or above most of the fixed categories (zoomed) */
    double ymax_mib;     /* the top of the y axis */
    size_t n;            /* steps */
} frame;

static double fx(const frame *f, double step) {
    return PLOT_LEFT + (PLOT_RIGHT - PLOT_LEFT) * (f->n ? step / (double)f->n : 0);
}

/* Below a zoomed axis's base everything sits on the bottom edge. */
static double fy(const frame *f, double bytes) {
    double v = bytes / MIB;
    if (v < f->ybase_mib) v = f->ybase_mib;
    return f->top + PLOT_H - PLOT_H * (v - f->ybase_mib) / (f->ymax_mib - f->ybase_mib);
}

/* The y axis both panels share. Parameters, gradients and optimizer state are the same at every step; when they
 * dwarf what moves (a big model at a small micro-batch), an axis from 0 would flatten the activations to a line,
 * so the axis then starts just below the top of the fixed block and says so. */
static void y_axis(double fixed_mib, double top_mib, double *base, double *ymax) {
    if (!(top_mib > 0)) top_mib = 1;
    double moving = top_mib - fixed_mib;
    if (fixed_mib <= 2 * moving) {
        double step = svg_nice_step(top_mib * 1.15, 5);
        *base = 0;
        *ymax = ceil(top_mib * 1.15 / step) * step;
        return;
    }
    double span = moving / 0.7, step = svg_nice_step(span, 5);
    *base = floor((fixed_mib - 0.3 * span) / step) * step;
    if (*base < 0) *base = 0;
    *ymax = ceil((top_mib + 0.15 * span) / step) * step;
}

static void put_defs(svg_out *s) {
    svg_put(s, "<defs><pattern id=\"recompute\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
               "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fdae6b\" fill-opacity=\"0.25\"/>"
           "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#a05a00\" stroke-width=\"2\" stroke-opacity=\"0.55\"/>"
           "</pattern></defs>\n");
}

static void put_header(svg_out *s, const plan_timeline *t) {
    char title[256], budget[32] = "";
    snprintf(title, sizeof title, "Memory over one optimizer step: %s, batch %zu, micro-batch %zu", t->model,
             t->batch, t->micro_batch);
    svg_label(s, PLOT_LEFT, 30, "font-size=\"18\" font-weight=\"bold\"", title);
    if (t->budget) snug_format_bytes(t->budget, budget, sizeof budget);
    char sub[256];
    snprintf(sub, sizeof sub,
             "Bytes live per category at each step of the schedule (one micro-batch's forward and backward, then "
             "the update)%s%s",
             t->budget ? "; budget " : "", budget);
    svg_label(s, PLOT_LEFT, 52, "font-size=\"13\" fill=\"#444\"", sub);
}

/* The six categories in stack order (top of the stack first, as they appear in the panels), then the marks. */
static void put_legend(svg_out *s, bool with_budget) {
    double x = PLOT_LEFT, y = 76;
    for (int i = SNUG_MEM_NCATEGORIES - 1; i >= 0; i--) {
        snug_mem_category c = stack_order[i];
        const char *name = snug_mem_category_name(c);
        svg_put(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", x, y - 11,
            category_colour[c]);
        svg_label(s, x + 19, y, "font-size=\"13\"", name);
        x += 19 + CHAR_W * 1.1 * (double)strlen(name) + 18;
    }
    svg_put(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"url(#recompute)\" stroke=\"#a05a00\" "
               "stroke-width=\"0.5\"/>\n", x, y - 11);
    svg_label(s, x + 19, y, "font-size=\"13\"", "recomputed steps");
    x += 19 + CHAR_W * 1.1 * 16 + 18;
    svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#111\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"6 3\"/>\n", x, y - 4, x + 22, y - 4);
    svg_label(s, x + 27, y, "font-size=\"13\"", "peak");
    x += 27 + CHAR_W * 1.1 * 4 + 18;
    if (!with_budget) return;
    svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"1.5\"/>\n", x,
        y - 4, x + 22, y - 4);
    svg_label(s, x + 27, y, "font-size=\"13\"", "budget");
}

/* One category's band as a step-shaped polygon between the running sums below and above it. */
static void put_band(svg_out *s, const frame *f, const panel_data *d, int level) {
    snug_mem_category c = stack_order[level];
    svg_put(s, "<polygon fill=\"%s\" stroke=\"none\" points=\"", category_colour[c]);
    for (size_t i = 0; i < d->n; i++) {
        size_t upper = 0;
        for (int l = 0; l <= level; l++) upper += d->steps[i].bytes[stack_order[l]];
        svg_put(s, "%.2f,%.2f %.2f,%.2f ", fx(f, (double)i), fy(f, (double)upper), fx(f, (double)i + 1),
            fy(f, (double)upper));
    }
    for (size_t j = d->n; j-- > 0;) {
        size_t lower = 0;
        for (int l = 0; l < level; l++) lower += d->steps[j].bytes[stack_order[l]];
        svg_put(s, "%.2f,%.2f %.2f,%.2f ", fx(f, (double)j + 1), fy(f, (double)lower), fx(f, (double)j),
            fy(f, (double)lower));
    }
    svg_put(s, "\"/>\n");
}

/* Runs of consecutive steps in one phase: [begin, end). Returns the end of the run starting at begin. */
static size_t phase_run_end(const panel_data *d, size_t begin) {
    size_t end = begin + 1;
    while (end < d->n && d->steps[end].phase == d->steps[begin].phase) end++;
    return end;
}

/* Hatching over every run of recomputed steps, on top of the bands so it shows whatever lies beneath. */
static void put_recompute_shading(svg_out *s, const frame *f, const panel_data *d) {
    for (size_t b = 0; b < d->n;) {
        size_t e = phase_run_end(d, b);
        if (d->steps[b].phase == SNUG_PHASE_RECOMPUTE)
            svg_put(s, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"url(#recompute)\"/>\n",
                fx(f, (double)b), f->top, fx(f, (double)e) - fx(f, (double)b), PLOT_H);
        b = e;
    }
}

static void put_axes(svg_out *s, const frame *f) {
    double bottom = f->top + PLOT_H;
    double ystep = svg_nice_step(f->ymax_mib - f->ybase_mib, 5);
    for (double v = f->ybase_mib; v <= f->ymax_mib + 1e-9; v += ystep) {
        double y = bottom - PLOT_H * (v - f->ybase_mib) / (f->ymax_mib - f->ybase_mib);
        char tick[32];
        snprintf(tick, sizeof tick, "%g", v);
        svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-opacity=\"0.12\"/>\n",
            PLOT_LEFT, y, PLOT_RIGHT, y);
        svg_label(s, PLOT_LEFT - 6, y + 4, "font-size=\"12\" text-anchor=\"end\"", tick);
    }
    double xstep = svg_nice_step((double)f->n, 10);
    if (xstep < 1) xstep = 1;
    for (double v = 0; v <= (double)f->n + 1e-9; v += xstep) {
        char tick[32];
        snprintf(tick, sizeof tick, "%g", v);
        svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", fx(f, v), bottom,
            fx(f, v), bottom + 4);
        svg_label(s, fx(f, v), bottom + STRIP_H + 18, "font-size=\"11\" text-anchor=\"middle\" fill=\"#444\"", tick);
    }
    svg_put(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#000\"/>\n",
        PLOT_LEFT, f->top, PLOT_RIGHT - PLOT_LEFT, PLOT_H);
    double mid = f->top + PLOT_H / 2;
    svg_put(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 %.1f %.1f)\">memory in use (MiB)</text>\n",
            PLOT_LEFT - 52, mid, PLOT_LEFT - 52, mid);
    svg_label(s, (PLOT_LEFT + PLOT_RIGHT) / 2, bottom + STRIP_H + 36, "font-size=\"13\" text-anchor=\"middle\"",
              "step of the schedule: one micro-batch's forward and backward, then the optimizer update");
}

/* The steps of one phase group: forward; backward with the recompute steps it interleaves; update. Returns
 * false when the plan has none. */
static bool group_range(const panel_data *d, int group, size_t *first, size_t *end) {
    bool any = false;
    for (size_t i = 0; i < d->n; i++) {
        snug_phase ph = d->steps[i].phase;
        int g = ph == SNUG_PHASE_FORWARD ? 0 : ph == SNUG_PHASE_UPDATE ? 2 : 1;
        if (g != group) continue;
        if (!any) *first = i;
        *end = i + 1;
        any = true;
    }
    return any;
}

/* The phase strip under the plot: one coloured segment per run of steps (recompute hatched), and one name per
 * phase group over it, so that a backward pass cut into many short runs by recompute still reads as one. */
static void put_phase_strip(svg_out *s, const frame *f, const panel_data *d) {
    double y = f->top + PLOT_H + 1;
    for (size_t b = 0; b < d->n;) {
        size_t e = phase_run_end(d, b);
        snug_phase ph = d->steps[b].phase;
        double x0 = fx(f, (double)b), x1 = fx(f, (double)e);
        const char *fill = ph == SNUG_PHASE_RECOMPUTE ? "url(#recompute)" : phase_colour[ph];
        svg_put(s, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"/>\n", x0, y, x1 - x0,
            STRIP_H, fill);
        b = e;
    }
    static const char *const names[3] = {"forward", "backward", "update"};
    for (int g = 0; g < 3; g++) {
        size_t first = 0, end = 0;
        if (!group_range(d, g, &first, &end)) continue;
        double x0 = fx(f, (double)first), x1 = fx(f, (double)end);
        bool recomputes = false;
        for (size_t i = first; i < end; i++) recomputes |= d->steps[i].phase == SNUG_PHASE_RECOMPUTE;
        const char *name = g == 1 && recomputes ? "backward, with recompute (hatched)" : names[g];
        const char *halo = "font-size=\"12\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"";
        char attrs[160];
        if (x1 - x0 > CHAR_W * (double)strlen(name) + 6) {
            snprintf(attrs, sizeof attrs, "%s text-anchor=\"middle\"", halo);
            svg_label(s, (x0 + x1) / 2, y + 13, attrs, name);
        } else if (end == d->n) {
            svg_label(s, x1 + 4, y + 13, "font-size=\"12\"", name);  /* a narrow last group: beside the strip */
        }
    }
}

/* A dashed line at the peak across the plot, a dot on the step that reaches it, and its size and place. */
static void put_peak(svg_out *s, const frame *f, const panel_data *d, bool label_below) {
    if (d->n == 0) return;
    const snug_plan_step_info *p = &d->steps[d->peak_step];
    double y = fy(f, (double)d->peak), x = fx(f, (double)d->peak_step + 0.5);
    svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#111\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"6 3\"/>\n", PLOT_LEFT, y, PLOT_RIGHT, y);
    svg_put(s, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#111\"/>\n", x, y);
    char bytes[32], label[256];
    snprintf(label, sizeof label, "peak %s: %s %s (step %zu)", snug_format_bytes(d->peak, bytes, sizeof bytes),
             p->layer ? p->layer : "?", snug_phase_name(p->phase), d->peak_step);
    /* keep the label inside the plot, on the side of the dot with more room */
    bool right = x < (PLOT_LEFT + PLOT_RIGHT) / 2;
    svg_put(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\" text-anchor=\"%s\" stroke=\"#fff\" "
               "stroke-width=\"3\" paint-order=\"stroke\">", right ? x + 8 : x - 8, label_below ? y + 17 : y - 7,
        right ? "start" : "end");
    svg_text(s, label);
    svg_put(s, "</text>\n");
}

static void put_budget(svg_out *s, const frame *f, size_t budget, bool label_below) {
    if (!budget) return;
    double y = fy(f, (double)budget);
    char bytes[32], label[64];
    snprintf(label, sizeof label, "budget %s", snug_format_bytes(budget, bytes, sizeof bytes));
    svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"1.5\"/>\n",
        PLOT_LEFT, y, PLOT_RIGHT, y);
    svg_put(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#c00\" stroke=\"#fff\" stroke-width=\"3\" "
               "paint-order=\"stroke\">", PLOT_LEFT + 6, label_below ? y + 15 : y - 5);
    svg_text(s, label);
    svg_put(s, "</text>\n");
}

static void put_panel_title(svg_out *s, const panel_data *d, double y) {
    const snug_plan_summary *sm = &d->summary;
    char title[256], total[32];
    snug_format_bytes(sm->total, total, sizeof total);
    double pct = sm->step_flops > 0 ? 100.0 * sm->recompute_flops / sm->step_flops : 0;
    if (sm->segments > 0)
        snprintf(title, sizeof title, "%s: checkpoint %s, %zu recomputed segment%s (%.1f%% of the FLOPs), %s reserved",
                 d->title, d->tp->policy, sm->segments, sm->segments == 1 ? "" : "s", pct, total);
    else
        snprintf(title, sizeof title, "%s: checkpoint %s, nothing recomputed, %s reserved", d->title,
                 d->tp->policy, total);
    svg_label(s, PLOT_LEFT, y, "font-size=\"15\" font-weight=\"bold\"", title);
}

/* Both panels share the y scale and the x scale (the longer schedule), so the extra recompute steps show as
 * extra length. */
/* On a zoomed axis: a break mark at its foot, and a note that the fixed categories continue below. */
static void put_axis_break(svg_out *s, const frame *f, const panel_data *d) {
    if (f->ybase_mib <= 0) return;
    double y = f->top + PLOT_H;
    svg_put(s, "<path d=\"M%.1f %.1f l10 -5 M%.1f %.1f l10 -5\" stroke=\"#000\" stroke-width=\"1.5\"/>\n",
            PLOT_LEFT - 5, y - 18, PLOT_LEFT - 5, y - 13);
    const size_t *b = d->steps[0].bytes;
    char fixed[32], base[32], note[160];
    snug_format_bytes(b[SNUG_MEM_PARAMS] + b[SNUG_MEM_GRADS] + b[SNUG_MEM_OPTIM], fixed, sizeof fixed);
    snprintf(base, sizeof base, "%g MiB", f->ybase_mib);
    snprintf(note, sizeof note, "axis from %s: params + grads + optim (%s at every step) continue below", base,
             fixed);
    svg_put(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#fff\">", PLOT_LEFT + 8, y - 8);
    svg_text(s, note);
    svg_put(s, "</text>\n");
}

static void put_panel(svg_out *s, const panel_data *d, double top, double ybase_mib, double ymax_mib, size_t steps,
                      size_t budget) {
    frame f = {.top = top + PANEL_TITLE_H, .ybase_mib = ybase_mib, .ymax_mib = ymax_mib, .n = steps};
    put_panel_title(s, d, top + 20);
    svg_put(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\"/>\n", PLOT_LEFT, f.top,
        PLOT_RIGHT - PLOT_LEFT, PLOT_H);
    for (int level = 0; level < SNUG_MEM_NCATEGORIES; level++) put_band(s, &f, d, level);
    put_recompute_shading(s, &f, d);
    put_axes(s, &f);
    if (d->n > 0) put_axis_break(s, &f, d);
    /* the two labels go on opposite sides of their lines when the lines are close */
    bool close = budget && fabs(fy(&f, (double)budget) - fy(&f, (double)d->peak)) < 18;
    bool budget_above_peak = budget >= d->peak;
    put_budget(s, &f, budget, close && !budget_above_peak);
    put_peak(s, &f, d, close && budget_above_peak);
    put_phase_strip(s, &f, d);
}

/* The scales both panels share: y from the highest peak or the budget (and the fixed categories, for a zoomed
 * axis), x from the longer schedule. */
typedef struct scale {
    double ybase_mib, ymax_mib;
    size_t steps;
} scale;

static scale shared_scale(const panel_data d[PLAN_TIMELINE_PLANS], size_t budget) {
    scale sc = {0};
    double top = (double)budget, fixed = HUGE_VAL;
    for (int p = 0; p < PLAN_TIMELINE_PLANS; p++) {
        if ((double)d[p].peak > top) top = (double)d[p].peak;
        if (d[p].n > sc.steps) sc.steps = d[p].n;
        for (size_t i = 0; i < d[p].n; i++) {
            const size_t *b = d[p].steps[i].bytes;
            double f = (double)(b[SNUG_MEM_PARAMS] + b[SNUG_MEM_GRADS] + b[SNUG_MEM_OPTIM]);
            if (f < fixed) fixed = f;
        }
    }
    y_axis(fixed == HUGE_VAL ? 0 : fixed / MIB, top / MIB, &sc.ybase_mib, &sc.ymax_mib);
    return sc;
}

static int put_document(FILE *out, const plan_timeline *t, const panel_data d[PLAN_TIMELINE_PLANS]) {
    scale sc = shared_scale(d, t->budget);
    double height = HEADER_H + PLAN_TIMELINE_PLANS * PANEL_H + FOOTER_H;
    svg_out s = {.out = out, .failed = false};
    svg_put(&s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n", WIDTH, height, WIDTH, height);
    svg_put(&s, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    put_defs(&s);
    put_header(&s, t);
    put_legend(&s, t->budget != 0);
    for (int p = 0; p < PLAN_TIMELINE_PLANS; p++)
        put_panel(&s, &d[p], HEADER_H + p * PANEL_H, sc.ybase_mib, sc.ymax_mib, sc.steps, t->budget);
    svg_put(&s, "</svg>\n");
    return s.failed ? -1 : 0;
}

static const char *const panel_titles[PLAN_TIMELINE_PLANS] = {"Chosen plan", "Same micro-batch, no checkpointing"};

int plan_timeline_svg(const plan_timeline *t, FILE *out) {
    panel_data d[PLAN_TIMELINE_PLANS];
    int loaded = 0;
    for (; loaded < PLAN_TIMELINE_PLANS; loaded++)
        if (load_panel(&t->plans[loaded], panel_titles[loaded], &d[loaded]) != 0) break;
    int rc = -1;
    if (loaded == PLAN_TIMELINE_PLANS) {
        if (d[0].summary.segments == 0) d[1].title = "No checkpointing (the chosen plan itself)";
        rc = put_document(out, t, d);
    }
    for (int p = 0; p < loaded; p++) free(d[p].steps);
    return rc;
}
