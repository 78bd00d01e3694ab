/* Learning-rate schedules. `step` counts optimizer steps, 0-based, never micro-batches: a window of k
 * micro-batches is one step, so changing the micro-batch size (to fit memory) leaves the schedule unchanged.
 *
 * peak = base_lr * (linear_scaling ? batch / reference_batch : 1)     (Goyal et al. 2017; reference 0 -> 256)
 * CONSTANT: peak at every step (warmup_steps is ignored).
 * COSINE:   step < warmup:  peak * (step + 1) / warmup     (the first step already moves; step warmup-1 = peak)
 *           otherwise:      min + (peak - min) * 0.5 * (1 + cos(pi * q)),  min = peak * min_lr_ratio,
 *                           q = (step - warmup) / max(1, total - warmup), clamped to [0, 1].
 * q reaches 1 at step == total_steps, one past the last step, as with PyTorch's CosineAnnealingLR(T_max =
 * total - warmup) stepped after each optimizer step and nanoGPT's schedule; steps beyond total stay at min.
 * Everything is computed in double and rounded once. */
#include <math.h>

#include "snug.h"

#define SCHEDULE_PI 3.14159265358979323846
#define SCHEDULE_REFERENCE_BATCH 256

static double peak_lr(const snug_schedule_config *s, float base_lr, size_t batch) {
    if (!s->linear_scaling) return (double)base_lr;
    const size_t ref = s->reference_batch != 0 ? s->reference_batch : SCHEDULE_REFERENCE_BATCH;
    return (double)base_lr * ((double)batch / (double)ref);
}

static double cosine_lr(const snug_schedule_config *s, double peak, long step, long total_steps) {
    const long warmup = s->warmup_steps > 0 ? s->warmup_steps : 0;
    if (step < warmup) return peak * (double)(step + 1) / (double)warmup;
    const long total = total_steps > warmup ? total_steps : warmup;  /* no overflow in total - warmup */
    const long span = total - warmup > 1 ? total - warmup : 1;
    double q = (double)(step - warmup) / (double)span;
    if (q > 1.0) q = 1.0;
    const double min = peak * (double)s->min_lr_ratio;
    return min + (peak - min) * 0.5 * (1.0 + cos(SCHEDULE_PI * q));
}

float snug_schedule_lr(const snug_schedule_config *s, float base_lr, size_t batch, long step, long total_steps) {
    const double peak = peak_lr(s, base_lr, batch);
    if (step < 0) step = 0;  /* before the first step: treat as the first */
    switch (s->kind) {
    case SNUG_SCHEDULE_CONSTANT: return (float)peak;
    case SNUG_SCHEDULE_COSINE:   return (float)cosine_lr(s, peak, step, total_steps);
    }
    return (float)peak;
}
