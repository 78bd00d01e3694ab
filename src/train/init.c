/* Parameter initialisation. Each parameter draws from its own RNG stream (its index in the graph), element by
 * element, so the values depend only on the seed and the model, never on the micro-batch or thread count. A
 * parameter whose values came with the model (an ONNX initializer) starts from them instead. */
#include <math.h>

#include "core/rng.h"
#include "train/trainer.h"

static float init_bound(const graph_param *p) {
    /* kaiming_uniform_(a = sqrt(5)) as nn.Linear and nn.Conv2d use: gain^2 = 2 / (1 + 5), so the bound
     * sqrt(3) * gain / sqrt(fan_in) is 1 / sqrt(fan_in), the same as their bias bound. */
    return p->fan_in ? 1.0f / sqrtf((float)p->fan_in) : 0.0f;
}

void trainer_init_params(snug_trainer *tr) {
    const snug_graph *g = tr->g;
    trainer_copies_stale(tr);
    for (int i = 0; i < g->n_params; i++) {
        const graph_param *p = &g->params[i];
        float *v = (p->buffer ? tr->x.state : tr->x.params) + p->offset;
        float bound = init_bound(p);
        if (p->values) {
            for (size_t j = 0; j < p->numel; j++) v[j] = p->values[j] * p->init_scale;
            continue;
        }
        for (size_t j = 0; j < p->numel; j++) {
            switch (p->init) {
            case INIT_KAIMING_UNIFORM:
            case INIT_BIAS_UNIFORM:
                v[j] = bound * (2.0f * snug_rng_uniform(tr->cfg.seed, (uint64_t)i, j) - 1.0f);
                break;
            case INIT_ZEROS: v[j] = 0.0f; break;
            case INIT_ONES: v[j] = 1.0f; break;
            }
            v[j] *= p->init_scale;
        }
    }
}
