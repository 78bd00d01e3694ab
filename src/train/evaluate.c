/* Evaluation: forward only, micro-batch by micro-batch through the training buffers, so it needs no engine
 * memory beyond the plan. Scores come from the logits: the mean loss per item (nats; bits too), the argmax
 * accuracy, and for per-pixel models a confusion count per class (true positives, false positives, false
 * negatives) that gives the IoU of every class. Over several ranks each scores its contiguous shard of the data
 * set and the sums are all-reduced, so every rank returns the result over the whole set. */
#include "core/error.h"
#include "data/dataset.h"
#include "ops/op.h"
#include "train/read.h"
#include "train/trainer.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define STACK_CLASSES 64  /* per-class counts of up to this many classes live on the stack */

/* What is summed over the micro-batches and the ranks. */
typedef struct eval_sums {
    double loss;
    size_t correct, items;
    size_t *conf;  /* pixels only: (classes, 3): true positives, false positives, false negatives; else NULL */
    size_t *matrix; /* (classes, classes): items of target t predicted p at [t * classes + p]; or NULL */
} eval_sums;

/* The logits' layout per sample: (outer, classes, inner), i.e. (classes), (T, classes) or (classes, H, W). */
typedef struct logits_layout {
    snug_eval_kind kind;
    size_t classes, inner;
} logits_layout;

static logits_layout layout_of(const snug_graph *g) {
    const snug_shape *s = &g->tensors[g->nodes[g->loss_node].inputs[0]].shape;
    if (s->rank == 3) return (logits_layout){SNUG_EVAL_PIXELS, s->dims[0], s->dims[1] * s->dims[2]};
    if (s->rank == 2) return (logits_layout){SNUG_EVAL_TOKENS, s->dims[1], 1};
    return (logits_layout){SNUG_EVAL_SAMPLES, s->dims[0], 1};
}

/* The class whose logit is largest; the classes are `stride` apart. */
static size_t argmax(const float *v, size_t n, size_t stride) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i * stride] > v[best * stride]) best = i;
    return best;
}

/* Adds the first len samples in the buffers: one item per target (a sample, a token or a pixel; see
 * softmax_xent.c), ignored targets skipped. items_per_sample = logits numel / classes. */
static void score_batch(const exec *x, const logits_layout *l, size_t len, size_t items_per_sample,
                        eval_sums *sum) {
    const size_t n = len * items_per_sample;
    for (size_t i = 0; i < n; i++) {
        const int32_t t = x->targets[i];
        if (t < 0 || (size_t)t >= l->classes) continue; /* ignored, as the loss does */
        /* item i: sample-and-row i / inner, pixel i % inner */
        const float *logits = x->logits + (i / l->inner) * l->classes * l->inner + i % l->inner;
        const size_t pred = argmax(logits, l->classes, l->inner);
        sum->loss += x->item_loss[i];
        sum->items++;
        sum->correct += pred == (size_t)t;
        if (sum->matrix) sum->matrix[(size_t)t * l->classes + pred]++;
        if (sum->conf && pred == (size_t)t) sum->conf[3 * (size_t)t]++;
        else if (sum->conf) sum->conf[3 * pred + 1]++, sum->conf[3 * (size_t)t + 2]++;
    }
}

/* Forward over this rank's shard of ds, micro-batch by micro-batch. */
static snug_status score_shard(snug_trainer *tr, const snug_dataset *ds, const logits_layout *l, eval_sums *sum,
                               snug_error *err) {
    size_t begin, n, m = tr->plan->m;
    dist_shard(snug_dataset_size(ds), tr->dist.rank, tr->dist.size, &begin, &n);
    const size_t per_sample = tr->g->tensors[tr->g->nodes[tr->g->loss_node].inputs[0]].numel / l->classes;
    size_t idx_chunk[1024];
    size_t *idx = m <= 1024 ? idx_chunk : malloc(m * sizeof *idx);
    if (!idx) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the evaluation index");
    for (size_t start = 0; start < n; start += m) {
        size_t len = n - start < m ? n - start : m;
        for (size_t i = 0; i < len; i++) idx[i] = begin + start + i;
        trainer_read_plain(tr, ds, idx, len, tr->x.input, tr->x.targets);
        exec_key key = {.seed = tr->cfg.seed, .training = false};
        exec_forward(&tr->x, len, &key);
        score_batch(&tr->x, l, len, per_sample, sum);
    }
    if (idx != idx_chunk) free(idx);
    return SNUG_OK;
}

/* Mean IoU over the classes that occur or are predicted, and the foreground (class 1) IoU of two classes. */
static void set_iou(const size_t *conf, size_t classes, snug_eval_result *res) {
    double total = 0;
    size_t present = 0;
    for (size_t c = 0; c < classes; c++) {
        size_t uni = conf[3 * c] + conf[3 * c + 1] + conf[3 * c + 2];
        if (uni == 0) continue;
        double iou = (double)conf[3 * c] / (double)uni;
        total += iou;
        present++;
        if (classes == 2 && c == 1) res->foreground_iou = iou;
    }
    res->mean_iou = present ? total / (double)present : 0;
}

/* Sums over the ranks (each waiting at most `timeout` seconds for them), then the result. */
static snug_status finish(eval_sums *sum, const logits_layout *l, double timeout, snug_eval_result *res,
                          snug_error *err) {
    size_t counts[2] = {sum->correct, sum->items};
    snug_status s = dist_allreduce_doubles(&sum->loss, 1, timeout, err);
    if (s == SNUG_OK) s = dist_allreduce_sizes(counts, 2, DIST_SUM, timeout, err);
    if (s == SNUG_OK && sum->conf) s = dist_allreduce_sizes(sum->conf, 3 * l->classes, DIST_SUM, timeout, err);
    if (s == SNUG_OK && sum->matrix)
        s = dist_allreduce_sizes(sum->matrix, l->classes * l->classes, DIST_SUM, timeout, err);
    if (s != SNUG_OK) return s;
    memset(res, 0, sizeof *res);
    res->kind = l->kind;
    res->classes = l->classes;
    res->items = counts[1];
    res->loss = counts[1] ? sum->loss / (double)counts[1] : 0;
    res->bits = res->loss / log(2.0);
    res->accuracy = counts[1] ? (double)counts[0] / (double)counts[1] : 0;
    if (sum->conf) set_iou(sum->conf, l->classes, res);
    return SNUG_OK;
}

static snug_status evaluate(snug_trainer *tr, const snug_dataset *ds, snug_eval_result *res, size_t *matrix,
                            snug_error *err) {
    snug_status s = trainer_check_dataset(tr, ds, err);
    if (s != SNUG_OK) return s;
    const logits_layout l = layout_of(tr->g);
    size_t conf_stack[3 * STACK_CLASSES] = {0};
    eval_sums sum = {.matrix = matrix};
    if (matrix) memset(matrix, 0, l.classes * l.classes * sizeof *matrix);
    if (l.kind == SNUG_EVAL_PIXELS)
        sum.conf = l.classes <= STACK_CLASSES ? conf_stack : calloc(3 * l.classes, sizeof *sum.conf);
    if (l.kind == SNUG_EVAL_PIXELS && !sum.conf)
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the counts of %zu classes", l.classes);
    const double t0 = omp_get_wtime();
    exec_weights_changed(&tr->x); /* a step or the caller may have changed them since they were derived */
    s = score_shard(tr, ds, &l, &sum, err);
    if (s == SNUG_OK) s = dataset_read_status(ds, err);
    if (s == SNUG_OK) s = finish(&sum, &l, tr->cfg.rank_timeout_seconds, res, err);
    const snug_step_stats at = {.step = tr->step, .epoch = tr->epoch};
    snug_error why;
    if (s == SNUG_OK && tr->log &&
        snug_run_log_eval(tr->log, &at, res, tr->cfg.eval_name ? tr->cfg.eval_name : "evaluation", &why) != SNUG_OK)
        trainer_drop_log(tr, &why);
    if (sum.conf != conf_stack) free(sum.conf);
    /* An evaluation between training steps is not training time: move the training clock's start past it. */
    if (tr->start_time != 0) tr->start_time += omp_get_wtime() - t0;
    return s;
}

snug_status snug_trainer_evaluate(snug_trainer *tr, const snug_dataset *ds, snug_eval_result *res,
                                  snug_error *err) {
    return evaluate(tr, ds, res, NULL, err);
}

snug_status snug_trainer_evaluate_confusion(snug_trainer *tr, const snug_dataset *ds, snug_eval_result *res,
                                            size_t *confusion, snug_error *err) {
    if (!confusion) return snug_fail(err, SNUG_E_ARG, "snug_trainer_evaluate_confusion: confusion is NULL");
    return evaluate(tr, ds, res, confusion, err);
}

/* The public form of the trainer's own check (train/trainer.c), so a caller can fail before any work. */

size_t snug_trainer_classes(const snug_trainer *tr) { return layout_of(tr->g).classes; }
