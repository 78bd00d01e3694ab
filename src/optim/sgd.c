/* SGD, as torch.optim.SGD (dampening 0), one element at a time in PyTorch's order of operations:
 *   d = g + wd * p                         grad.add(param, alpha=wd)
 *   buf = momentum * buf + d               buf.mul_(momentum).add_(grad)
 *   u = nesterov ? d + momentum * buf : buf
 *   p = p + (-lr) * u                      param.add_(grad, alpha=-lr)
 *
 * PyTorch creates the buffer on the first step as a copy of d. Ours is zero there (the planner's memory is
 * zeroed), and momentum * 0 + d == d exactly in float for every finite momentum and d: the product is a zero
 * and adding a zero to d returns d (only d = -0 turns into +0, which changes no later value). So one formula
 * serves every step, and no first-step flag has to survive a save/resume. tests/test_optim.c checks this
 * against a reference that copies d on the first step as PyTorch does.
 *
 * The loops are VM_KERNEL clones (AVX-512 where the CPU has it): the step streams three or four arrays of the
 * model's size, and `omp parallel for simd` loops compile to one element at a time here. */
#include "core/clones.h"
#include "optim/optim_impl.h"

typedef struct sgd_ctx {
    const float *p;  // (n) the parameters before the step
    float *buf;      // (n) momentum buffer, or NULL
    float nlr, wd, mom;
} sgd_ctx;

/* momentum == 0: no buffer, no state. Each kernel reads the parameters from p and writes the new ones to q. */
VM_KERNEL static void sgd_plain(float *restrict q, const float *restrict p, const float *restrict g, size_t n,
                                float gs, float nlr, float wd) {
    for (size_t i = 0; i < n; i++) {
        const float d = g[i] * gs + wd * p[i];
        q[i] = p[i] + nlr * d;
    }
}

/* Heavy-ball momentum: p moves along the buffer. */
VM_KERNEL static void sgd_momentum(float *restrict q, const float *restrict p, const float *restrict g,
                                   float *restrict buf, size_t n, float gs, float nlr, float wd, float mom) {
    for (size_t i = 0; i < n; i++) {
        const float d = g[i] * gs + wd * p[i];
        const float b = buf[i] * mom + d;
        buf[i] = b;
        q[i] = p[i] + nlr * b;
    }
}

/* Nesterov: p moves along d + momentum * buf. A loop of its own rather than a branch in the loop above. */
VM_KERNEL static void sgd_nesterov(float *restrict q, const float *restrict p, const float *restrict g,
                                   float *restrict buf, size_t n, float gs, float nlr, float wd, float mom) {
    for (size_t i = 0; i < n; i++) {
        const float d = g[i] * gs + wd * p[i];
        const float b = buf[i] * mom + d;
        buf[i] = b;
        q[i] = p[i] + nlr * (d + mom * b);
    }
}

static void plain_span(const void *ctx, const optim_grads *gr, size_t lo, size_t hi, float *p_new) {
    const sgd_ctx *c = ctx;
    sgd_plain(p_new, c->p + lo, gr->g + lo, hi - lo, gr->scale, c->nlr, c->wd);
}

static void momentum_span(const void *ctx, const optim_grads *gr, size_t lo, size_t hi, float *p_new) {
    const sgd_ctx *c = ctx;
    sgd_momentum(p_new, c->p + lo, gr->g + lo, c->buf + lo, hi - lo, gr->scale, c->nlr, c->wd, c->mom);
}

static void nesterov_span(const void *ctx, const optim_grads *gr, size_t lo, size_t hi, float *p_new) {
    const sgd_ctx *c = ctx;
    sgd_nesterov(p_new, c->p + lo, gr->g + lo, c->buf + lo, hi - lo, gr->scale, c->nlr, c->wd, c->mom);
}

void sgd_step(optim_state *st, float *params, const optim_grads *gr, float lr) {
    const snug_optim_config *cfg = &st->cfg;
    const sgd_ctx c = {.p = params, .buf = st->state, .nlr = -lr, .wd = cfg->weight_decay, .mom = cfg->momentum};
    if (cfg->momentum == 0.0f)
        optim_run(st, 3, plain_span, &c, gr, params);
    else
        optim_run(st, 5, cfg->nesterov ? nesterov_span : momentum_span, &c, gr, params);
}
