/* The curve of a run (snug_curve_write): its log drawn as an SVG in the manner of the memory timeline. Training
 * loss per step, thin, with a smoothed line over it (TensorBoard's bias-corrected exponential moving average,
 * so that the first steps are not pulled towards zero), and each evaluation set's loss as points joined, on the
 * left axis; the sets' accuracy (mean IoU for segmentation) in percent on the right; epochs marked. Every series
 * carries an id, class "series" and a <title>, so that a test or a reader of the file can find it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/run_log.h"
#include "report/svg.h"

/* Page geometry, in SVG user units (pixels). */
#define WIDTH 1000.0
#define PLOT_LEFT 80.0
#define PLOT_RIGHT (WIDTH - 80.0) /* room for the right axis */
#define PLOT_TOP 146.0            /* title, two lines of summary, two rows of legend */
#define PLOT_H 360.0
#define HEIGHT (PLOT_TOP + PLOT_H + 64.0)
#define CHAR_W 6.6                /* average width of a 12px sans-serif character, to lay out the legend */

#define SMOOTHING 0.9 /* the weight of the moving average: TensorBoard's default smoothing */
#define SETS_MAX 8    /* evaluation sets drawn; the lines of further sets are left out */

/* Tableau 10: the training loss blue; each set's loss and score in a hue of its own. */
#define TRAIN_COLOUR "#4e79a7"
static const char *const loss_colour[4] = {"#e15759", "#f28e2b", "#b07aa1", "#9c755f"};
static const char *const score_colour[4] = {"#59a14f", "#76b7b2", "#edc948", "#ff9da7"};

typedef struct point {
    double step, value;
} point;

typedef struct points {
    point *p;
    size_t n, cap;
} points;

typedef struct eval_set {
    char name[RUN_LOG_SET_MAX];
    points loss, accuracy, iou;
} eval_set;

/* What the log holds, read once. */
typedef struct curve_data {
    const char *title;
    points train;            /* loss per step; NaN where it was not finite */
    points epochs;           /* a boundary: the step that ended an epoch, and the epoch that follows */
    eval_set sets[SETS_MAX];
    size_t n_sets;
    bool iou;                /* some evaluation has a mean IoU: the right axis shows it instead of accuracy */
    double max_step;
    size_t skipped;
} curve_data;

static bool push(points *ps, double step, double value) {
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 64;
        point *p = realloc(ps->p, cap * sizeof *p);
        if (!p) return false;
        ps->p = p, ps->cap = cap;
    }
    ps->p[ps->n++] = (point){step, value};
    return true;
}

static void curve_data_free(curve_data *d) {
    free(d->train.p);
    free(d->epochs.p);
    for (size_t i = 0; i < d->n_sets; i++) free(d->sets[i].loss.p), free(d->sets[i].accuracy.p), free(d->sets[i].iou.p);
}

/* The set of that name, added when new; NULL past SETS_MAX. */
static eval_set *set_named(curve_data *d, const char *name) {
    const char *shown = *name ? name : "evaluation";
    for (size_t i = 0; i < d->n_sets; i++)
        if (strcmp(d->sets[i].name, shown) == 0) return &d->sets[i];
    if (d->n_sets == SETS_MAX) return NULL;
    eval_set *e = &d->sets[d->n_sets++];
    snprintf(e->name, sizeof e->name, "%s", shown);
    return e;
}

static bool add_record(curve_data *d, const run_log_record *r, long *last_epoch, double *last_step) {
    if ((double)r->step > d->max_step) d->max_step = (double)r->step;
    if (r->type == RUN_LOG_STEP) {
        if (*last_epoch >= 0 && r->epoch != *last_epoch && !push(&d->epochs, *last_step, (double)r->epoch))
            return false;
        *last_epoch = r->epoch, *last_step = (double)r->step;
        d->skipped += r->skipped;
        return push(&d->train, (double)r->step, r->loss);
    }
    eval_set *e = set_named(d, r->set);
    if (!e) return true;
    d->iou |= isfinite(r->mean_iou);
    return push(&e->loss, (double)r->step, r->loss) && push(&e->accuracy, (double)r->step, r->accuracy) &&
           push(&e->iou, (double)r->step, r->mean_iou);
}

static snug_status read_log(const char *path, curve_data *d, snug_error *err) {
    run_log_reader r;
    snug_status s = run_log_reader_open(&r, path, err);
    long last_epoch = -1;
    double last_step = 0;
    for (bool got = true; s == SNUG_OK && got;) {
        run_log_record rec;
        s = run_log_reader_next(&r, &rec, &got, err);
        if (s == SNUG_OK && got && !add_record(d, &rec, &last_epoch, &last_step))
            s = snug_fail(err, SNUG_E_OOM, "out of memory reading the run log '%s'", path);
    }
    run_log_reader_close(&r);
    return s;
}

/* ---- scales ---- */

typedef struct axis {
    double lo, hi, step; /* the range drawn and its tick spacing */
} axis;

typedef struct frame {
    double max_step;     /* the x axis runs from step 0 to this */
    axis loss, score;    /* left and right */
} frame;

static double fx(const frame *f, double step) {
    return PLOT_LEFT + (PLOT_RIGHT - PLOT_LEFT) * step / f->max_step;
}

static double fy(const axis *a, double v) {
    return PLOT_TOP + PLOT_H - PLOT_H * (v - a->lo) / (a->hi - a->lo);
}

static void range_of(const points *ps, double scale, double *lo, double *hi) {
    for (size_t i = 0; i < ps->n; i++) {
        double v = ps->p[i].value * scale;
        if (!isfinite(v)) continue;
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
    }
}

/* Round ticks around [lo, hi]; `floor0`: the axis starts at 0 unless a value is below it. */
static axis axis_over(double lo, double hi, bool floor0) {
    if (lo > hi) lo = 0, hi = 1; /* nothing finite to show */
    if (floor0 && lo > 0) lo = 0;
    axis a = {.step = svg_nice_step(hi - lo, 5)};
    a.lo = floor(lo / a.step) * a.step;
    a.hi = ceil(hi / a.step) * a.step;
    if (a.hi - a.lo < a.step) a.hi = a.lo + a.step; /* a single value */
    return a;
}

/* The right axis in percent, within [0, 100]. */
static axis score_axis(const curve_data *d) {
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (size_t i = 0; i < d->n_sets; i++) range_of(d->iou ? &d->sets[i].iou : &d->sets[i].accuracy, 100, &lo, &hi);
    axis a = axis_over(lo, hi, false);
    if (a.lo < 0) a.lo = 0;
    if (a.hi > 100) a.hi = 100;
    if (a.hi - a.lo < a.step) a.lo = a.hi - a.step;
    return a;
}

static frame frame_of(const curve_data *d) {
    frame f = {.max_step = d->max_step > 0 ? d->max_step : 1};
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    range_of(&d->train, 1, &lo, &hi);
    for (size_t i = 0; i < d->n_sets; i++) range_of(&d->sets[i].loss, 1, &lo, &hi);
    f.loss = axis_over(lo, hi, true);
    f.score = score_axis(d);
    return f;
}

/* ---- the series ---- */

/* Path data through the finite points: a gap where a value is not finite, a dot (a zero-length segment with
 * round caps) for a point alone between gaps. */
static void put_path_data(svg_out *s, const frame *f, const axis *a, const points *ps, double scale) {
    size_t run = 0;
    for (size_t i = 0; i <= ps->n; i++) {
        double v = i < ps->n ? ps->p[i].value * scale : NAN;
        if (!isfinite(v)) {
            if (run == 1) svg_put(s, " h0");
            run = 0;
            continue;
        }
        svg_put(s, "%s%.2f %.2f", run ? " L" : run == 0 && i ? " M" : "M", fx(f, ps->p[i].step), fy(a, v));
        run++;
    }
}

/* TensorBoard's smoothing: a moving average over the finite values, divided by the weight it has gathered so far
 * (1 - w^n) so that it starts at the first value rather than near zero; NaN where the value itself is not
 * finite. */
static bool smoothed(const points *in, points *out) {
    double last = 0;
    long n = 0;
    for (size_t i = 0; i < in->n; i++) {
        double v = in->p[i].value, sm = NAN;
        if (isfinite(v)) {
            last = last * SMOOTHING + (1 - SMOOTHING) * v;
            sm = last / (1 - pow(SMOOTHING, (double)++n));
        }
        if (!push(out, in->p[i].step, sm)) return false;
    }
    return true;
}

/* A line series: <path id class="series"><title/></path>. */
static void put_line(svg_out *s, const frame *f, const char *id, const char *title, const char *style,
                     const points *ps) {
    svg_put(s, "<path id=\"%s\" class=\"series\" fill=\"none\" stroke-linejoin=\"round\" stroke-linecap=\"round\" "
               "clip-path=\"url(#plot-area)\" %s d=\"", id, style);
    put_path_data(s, f, &f->loss, ps, 1);
    svg_put(s, "\"><title>");
    svg_text(s, title);
    svg_put(s, "</title></path>\n");
}

/* An evaluation series: the points joined, and a dot on each: <g id class="series"><title/>...</g>. */
static void put_points(svg_out *s, const frame *f, const axis *a, const char *id, const char *set, const char *title,
                       const char *colour, bool dashed, const points *ps, double scale) {
    svg_put(s, "<g id=\"%s\" class=\"series\" data-set=\"", id);
    svg_text(s, set);
    svg_put(s, "\" clip-path=\"url(#plot-area)\"><title>");
    svg_text(s, title);
    svg_put(s, "</title>\n<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" stroke-linejoin=\"round\" "
               "stroke-linecap=\"round\"%s d=\"", colour, dashed ? " stroke-dasharray=\"5 3\"" : "");
    put_path_data(s, f, a, ps, scale);
    svg_put(s, "\"/>\n");
    for (size_t i = 0; i < ps->n; i++) {
        double v = ps->p[i].value * scale;
        if (isfinite(v))
            svg_put(s, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", fx(f, ps->p[i].step), fy(a, v),
                    colour);
    }
    svg_put(s, "</g>\n");
}

/* "eval-loss", then "eval-loss-2", ... for the later sets. */
static void series_id(char *buf, size_t len, const char *base, size_t set) {
    if (set == 0) snprintf(buf, len, "%s", base);
    else snprintf(buf, len, "%s-%zu", base, set + 1);
}

static const char *score_name(const curve_data *d) {
    return d->iou ? "mean IoU" : "accuracy";
}

static void put_eval_sets(svg_out *s, const frame *f, const curve_data *d) {
    for (size_t i = 0; i < d->n_sets; i++) {
        const eval_set *e = &d->sets[i];
        char id[48], title[RUN_LOG_SET_MAX + 64];
        series_id(id, sizeof id, "eval-loss", i);
        snprintf(title, sizeof title, "%s loss after evaluations", e->name);
        put_points(s, f, &f->loss, id, e->name, title, loss_colour[i % 4], false, &e->loss, 1);
        series_id(id, sizeof id, d->iou ? "eval-mean-iou" : "eval-accuracy", i);
        snprintf(title, sizeof title, "%s %s in percent (right axis)", e->name, score_name(d));
        put_points(s, f, &f->score, id, e->name, title, score_colour[i % 4], true, d->iou ? &e->iou : &e->accuracy,
                   100);
    }
}

/* ---- axes, epochs, legend, header ---- */

static void put_y_ticks(svg_out *s, const axis *a, bool right) {
    long n = lround((a->hi - a->lo) / a->step);
    for (long i = 0; i <= n; i++) {
        double v = a->lo + (double)i * a->step, y = fy(a, v);
        char tick[32];
        snprintf(tick, sizeof tick, "%g", v);
        if (!right)
            svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
                       "stroke-opacity=\"0.12\"/>\n", PLOT_LEFT, y, PLOT_RIGHT, y);
        svg_label(s, right ? PLOT_RIGHT + 6 : PLOT_LEFT - 6, y + 4,
                  right ? "font-size=\"12\" text-anchor=\"start\" fill=\"#3a7a33\""
                        : "font-size=\"12\" text-anchor=\"end\"", tick);
    }
}

static void put_axes(svg_out *s, const frame *f, const curve_data *d) {
    double bottom = PLOT_TOP + PLOT_H;
    put_y_ticks(s, &f->loss, false);
    if (d->n_sets) put_y_ticks(s, &f->score, true);
    double xstep = svg_nice_step(f->max_step, 10);
    if (xstep < 1) xstep = 1;
    for (double v = 0; v <= f->max_step + 1e-9; v += xstep) {
        char tick[32];
        snprintf(tick, sizeof tick, "%g", v);
        svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", fx(f, v), bottom,
                fx(f, v), bottom + 4);
        svg_label(s, fx(f, v), bottom + 18, "font-size=\"11\" text-anchor=\"middle\" fill=\"#444\"", tick);
    }
    svg_put(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#000\"/>\n",
            PLOT_LEFT, PLOT_TOP, PLOT_RIGHT - PLOT_LEFT, PLOT_H);
    double mid = PLOT_TOP + PLOT_H / 2;
    svg_put(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 %.1f %.1f)\">loss (nats per item)</text>\n",
            PLOT_LEFT - 50, mid, PLOT_LEFT - 50, mid);
    if (d->n_sets)
        svg_put(s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" fill=\"#3a7a33\" "
                   "transform=\"rotate(90 %.1f %.1f)\">%s (%%)</text>\n",
                PLOT_RIGHT + 50, mid, PLOT_RIGHT + 50, mid, score_name(d));
    svg_label(s, (PLOT_LEFT + PLOT_RIGHT) / 2, bottom + 40, "font-size=\"13\" text-anchor=\"middle\"",
              "optimizer step");
}

/* A dashed line where each epoch begins, named at the top of the plot when there is room for the name. */
static void put_epochs(svg_out *s, const frame *f, const curve_data *d) {
    if (d->epochs.n == 0) return;
    svg_put(s, "<g id=\"epochs\" class=\"epochs\"><title>epoch boundaries</title>\n");
    svg_label(s, PLOT_LEFT + 4, PLOT_TOP + 14, "font-size=\"11\" fill=\"#666\"", "epoch 1");
    double last_label = PLOT_LEFT;
    for (size_t i = 0; i < d->epochs.n; i++) {
        double x = fx(f, d->epochs.p[i].step);
        svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" stroke-dasharray=\"3 3\"/>\n",
                x, PLOT_TOP, x, PLOT_TOP + PLOT_H + 6);
        if (x - last_label < 60 || x > PLOT_RIGHT - 50) continue;
        char name[32];
        snprintf(name, sizeof name, "epoch %.0f", d->epochs.p[i].value + 1);
        svg_label(s, x + 4, PLOT_TOP + 14, "font-size=\"11\" fill=\"#666\"", name);
        last_label = x;
    }
    svg_put(s, "</g>\n");
}

/* One legend entry: a short line (dashed, with a dot) and its words; wraps to the next row at the right edge. */
static void put_key(svg_out *s, double *x, double *y, const char *stroke, const char *extra, bool dot,
                    const char *text) {
    double w = 34 + CHAR_W * 1.05 * (double)strlen(text);
    if (*x + w > WIDTH - 20 && *x > PLOT_LEFT) *x = PLOT_LEFT, *y += 20;
    svg_put(s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" %s/>\n", *x, *y - 4, *x + 22,
            *y - 4, stroke, extra);
    if (dot) svg_put(s, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", *x + 11, *y - 4, stroke);
    svg_label(s, *x + 27, *y, "font-size=\"12\"", text);
    *x += w + 14;
}

static void put_legend(svg_out *s, const curve_data *d) {
    double x = PLOT_LEFT, y = 102;
    if (d->train.n) {
        put_key(s, &x, &y, TRAIN_COLOUR, "stroke-width=\"1\" stroke-opacity=\"0.4\"", false, "training loss");
        put_key(s, &x, &y, TRAIN_COLOUR, "stroke-width=\"2.2\"", false,
                "smoothed: moving average 0.9, bias-corrected (TensorBoard's)");
    }
    for (size_t i = 0; i < d->n_sets; i++) {
        char text[RUN_LOG_SET_MAX + 48];
        snprintf(text, sizeof text, "%s loss", d->sets[i].name);
        put_key(s, &x, &y, loss_colour[i % 4], "stroke-width=\"1.8\"", true, text);
        snprintf(text, sizeof text, "%s %s (right axis)", d->sets[i].name, score_name(d));
        put_key(s, &x, &y, score_colour[i % 4], "stroke-width=\"1.8\" stroke-dasharray=\"5 3\"", true, text);
    }
}

/* The last finite value of a series, NaN when none. */
static double last_finite(const points *ps, double *step) {
    for (size_t i = ps->n; i-- > 0;)
        if (isfinite(ps->p[i].value)) return *step = ps->p[i].step, ps->p[i].value;
    return NAN;
}

/* What the run came to, in words: steps, epochs and the last training loss on one line, the first set's last
 * scores on the next. */
static void put_summary(svg_out *s, const curve_data *d, const points *smooth) {
    char line[320];
    size_t n = 0;
    double step = 0, v;
    if (!d->train.n && !d->n_sets) n += (size_t)snprintf(line, sizeof line, "nothing logged yet");
    if (d->train.n)
        n += (size_t)snprintf(line + n, sizeof line - n, "%zu optimizer step%s, %zu epoch%s", d->train.n,
                              d->train.n == 1 ? "" : "s", d->epochs.n + 1, d->epochs.n ? "s" : "");
    if (d->skipped) n += (size_t)snprintf(line + n, sizeof line - n, ", %zu skipped (not finite)", d->skipped);
    if (isfinite(v = last_finite(&d->train, &step)))
        snprintf(line + n, sizeof line - n, "; last training loss %.4g (smoothed %.4g)", v,
                 last_finite(smooth, &step));
    svg_label(s, PLOT_LEFT, 56, "font-size=\"13\" fill=\"#444\"", line);
    if (!d->n_sets || !isfinite(v = last_finite(&d->sets[0].loss, &step))) return;
    double score_step = 0, score = last_finite(d->iou ? &d->sets[0].iou : &d->sets[0].accuracy, &score_step);
    n = (size_t)snprintf(line, sizeof line, "%s after step %.0f: loss %.4g", d->sets[0].name, step, v);
    if (isfinite(score) && score_step == step && n < sizeof line)
        snprintf(line + n, sizeof line - n, ", %s %.2f%%", score_name(d), 100 * score);
    svg_label(s, PLOT_LEFT, 74, "font-size=\"13\" fill=\"#444\"", line);
}

static void put_document(svg_out *s, const curve_data *d, const points *smooth) {
    frame f = frame_of(d);
    svg_put(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n", WIDTH, HEIGHT, WIDTH, HEIGHT);
    svg_put(s, "<title>");
    svg_text(s, d->title);
    svg_put(s, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    svg_put(s, "<defs><clipPath id=\"plot-area\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
               "</clipPath></defs>\n", PLOT_LEFT - 4, PLOT_TOP - 4, PLOT_RIGHT - PLOT_LEFT + 8, PLOT_H + 8);
    svg_label(s, PLOT_LEFT, 32, "font-size=\"18\" font-weight=\"bold\"", d->title);
    put_summary(s, d, smooth);
    put_legend(s, d);
    svg_put(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\"/>\n", PLOT_LEFT, PLOT_TOP,
            PLOT_RIGHT - PLOT_LEFT, PLOT_H);
    put_axes(s, &f, d);
    put_epochs(s, &f, d);
    if (d->train.n) {
        put_line(s, &f, "train-loss", "training loss per optimizer step",
                 "stroke=\"" TRAIN_COLOUR "\" stroke-width=\"1\" stroke-opacity=\"0.4\"", &d->train);
        put_line(s, &f, "train-loss-smoothed",
                 "training loss, smoothed: exponential moving average with weight 0.9, bias-corrected",
                 "stroke=\"" TRAIN_COLOUR "\" stroke-width=\"2.2\"", smooth);
    }
    put_eval_sets(s, &f, d);
    if (!d->train.n && !d->n_sets)
        svg_label(s, (PLOT_LEFT + PLOT_RIGHT) / 2, PLOT_TOP + PLOT_H / 2,
                  "font-size=\"14\" text-anchor=\"middle\" fill=\"#666\"", "nothing logged yet");
    svg_put(s, "</svg>\n");
}

typedef struct curve_job {
    const curve_data *data;
    const points *smooth;
    const char *path;
} curve_job;

static snug_status write_curve(FILE *f, void *user, snug_error *err) {
    const curve_job *job = user;
    svg_out s = {.out = f, .failed = false};
    errno = 0;
    put_document(&s, job->data, job->smooth);
    if (!s.failed) return SNUG_OK;
    return snug_fail(err, SNUG_E_IO, "cannot write the curve '%s': %s (is the disk full?)", job->path,
                     strerror(errno ? errno : EIO));
}

snug_status snug_curve_write(const char *log_path, const char *svg_path, const char *title, snug_error *err) {
    if (!log_path || !svg_path) return snug_fail(err, SNUG_E_ARG, "curve: a log and a picture path are needed");
    const char *slash = strrchr(log_path, '/');
    curve_data d = {.title = title ? title : slash ? slash + 1 : log_path};
    points smooth = {0};
    snug_status s = read_log(log_path, &d, err);
    if (s == SNUG_OK && !smoothed(&d.train, &smooth))
        s = snug_fail(err, SNUG_E_OOM, "out of memory drawing the curve of '%s'", log_path);
    curve_job job = {.data = &d, .smooth = &smooth, .path = svg_path};
    if (s == SNUG_OK) s = atomic_file_write(svg_path, NULL, "curve", write_curve, &job, err);
    free(smooth.p);
    curve_data_free(&d);
    return s;
}
