/* AdamW, as torch.optim.AdamW with amsgrad off (the single-tensor path PyTorch takes for CPU tensors), one
 * element at a time in PyTorch's order of operations:
 *   p = p * (1 - lr * wd)                  decoupled weight decay, before the moments
 *   m = lerp(m, g, 1 - b1)                 exp_avg.lerp_(grad, 1 - beta1)
 *   v = v * b2 + (1 - b2) * g * g          exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
 *   p = p + (-lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
 * with bc1 = 1 - b1^t and bc2 = 1 - b2^t, t = 1 on the first step. This is m_hat / (sqrt(v_hat) + eps) with
 * m_hat = m / bc1 and v_hat = v / bc2, arranged as PyTorch arranges it. The per-step scalars are computed in
 * double (b2^t for b2 = 0.999 is the difference of two numbers close to 1) and rounded to float once, as
 * PyTorch rounds its Python-float scalars when it hands them to a float kernel. */
#include <math.h>

#include "core/clones.h"
#include "optim/optim_impl.h"

/* The per-step scalars, rounded to float once. */
typedef struct adamw_scalars {
    float decay;     /* 1 - lr * wd */
    float w1, w1c;   /* lerp weight 1 - b1, and 1 - w1 */
    float b2, w2;    /* b2, 1 - b2 */
    float step;      /* -lr / bc1 */
    float bc2_sqrt;  /* sqrt(bc2) */
    float eps;
} adamw_scalars;

static adamw_scalars adamw_scalars_at(const snug_optim_config *c, float lr, long t) {
    const double bc1 = 1.0 - pow((double)c->beta1, (double)t);
    const double bc2 = 1.0 - pow((double)c->beta2, (double)t);
    adamw_scalars k;
    k.decay = (float)(1.0 - (double)lr * (double)c->weight_decay);
    k.w1 = (float)(1.0 - (double)c->beta1);
    k.w1c = 1.0f - k.w1;
    k.b2 = c->beta2;
    k.w2 = (float)(1.0 - (double)c->beta2);
    k.step = (float)(-(double)lr / bc1);
    k.bc2_sqrt = (float)sqrt(bc2);
    k.eps = c->eps;
    return k;
}

typedef struct adamw_ctx {
    const float *p;  // (n) the parameters before the step
    float *m, *v;    // (n) each
    adamw_scalars k;
} adamw_ctx;

/* Everything of one element but the first moment: updates v and returns the new parameter. */
static inline float adamw_param(float p, float g, float m, float *v, const adamw_scalars *k) {
    const float vi = *v * k->b2 + k->w2 * g * g;
    *v = vi;
    const float denom = sqrtf(vi) / k->bc2_sqrt + k->eps;
    return p * k->decay + k->step * m / denom;
}

/* PyTorch's lerp has two forms, self + w * (end - self) for |w| < 0.5 and end - (end - self) * (1 - w) above,
 * each exact at its own end point. One loop per form, each a VM_KERNEL clone (sqrt and division are correctly
 * rounded in every vector width, so every clone gives the same bits). The usual b1 >= 0.5 takes the first. */
VM_KERNEL static void adamw_small_weight(float *restrict q, const float *restrict p, const float *restrict g,
                                         float *restrict m, float *restrict v, size_t n, float gs,
                                         const adamw_scalars *k) {
    const adamw_scalars kk = *k;
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] * gs;
        const float mi = m[i] + kk.w1 * (gi - m[i]);
        m[i] = mi;
        q[i] = adamw_param(p[i], gi, mi, &v[i], &kk);
    }
}

VM_KERNEL static void adamw_large_weight(float *restrict q, const float *restrict p, const float *restrict g,
                                         float *restrict m, float *restrict v, size_t n, float gs,
                                         const adamw_scalars *k) {
    const adamw_scalars kk = *k;
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] * gs;
        const float mi = gi - (gi - m[i]) * kk.w1c;
        m[i] = mi;
        q[i] = adamw_param(p[i], gi, mi, &v[i], &kk);
    }
}

static void small_weight_span(const void *ctx, const optim_grads *gr, size_t lo, size_t hi, float *p_new) {
    const adamw_ctx *c = ctx;
    adamw_small_weight(p_new, c->p + lo, gr->g + lo, c->m + lo, c->v + lo, hi - lo, gr->scale, &c->k);
}

static void large_weight_span(const void *ctx, const optim_grads *gr, size_t lo, size_t hi, float *p_new) {
    const adamw_ctx *c = ctx;
    adamw_large_weight(p_new, c->p + lo, gr->g + lo, c->m + lo, c->v + lo, hi - lo, gr->scale, &c->k);
}

void adamw_step(optim_state *st,
                float *params,  // (n)
                const optim_grads *gr,
                float lr) {
    const size_t n = st->n;
    const adamw_ctx c = {.p = params, .m = st->state, .v = st->state + n,
                         .k = adamw_scalars_at(&st->cfg, lr, st->t)};
    optim_run(st, 7, fabsf(c.k.w1) < 0.5f ? small_weight_span : large_weight_span, &c, gr, params);
}
