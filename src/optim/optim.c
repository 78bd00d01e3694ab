/* The optimizer interface: how much state each optimizer needs, and one step dispatched by kind (the driver
 * that runs an optimizer's element-wise kernel over the parameters is run.c). */
#include <assert.h>

#include "optim/optim.h"
#include "optim/optim_impl.h"

snug_optim_config snug_optim_config_default(void) {
    return (snug_optim_config){.kind = SNUG_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f, .beta1 = 0.9f,
                               .beta2 = 0.999f, .eps = 1e-8f};
}

int optim_state_slots(const snug_optim_config *cfg) {
    switch (cfg->kind) {
    case SNUG_OPTIM_SGD:   return cfg->momentum != 0.0f ? 1 : 0;
    case SNUG_OPTIM_ADAMW: return 2;
    }
    return 0;
}

static void step(optim_state *st, float *params, const optim_grads *gr, float lr) {
    assert(st->state != NULL || optim_state_slots(&st->cfg) == 0);
    /* The counter advances first, so that AdamW's bias correction sees t = 1 on the first step (as PyTorch's
     * state["step"]); for SGD it only counts steps. */
    st->t += 1;
    switch (st->cfg.kind) {
    case SNUG_OPTIM_SGD:   sgd_step(st, params, gr, lr); return;
    case SNUG_OPTIM_ADAMW: adamw_step(st, params, gr, lr); return;
    }
    assert(!"optim_step: unknown optimizer kind (the trainer validates the config before planning)");
}

void optim_step(optim_state *st, float *params, const float *grads, float lr) {
    /* Read only: consume is off, so the kernels never write through this pointer. */
    const optim_grads gr = {.g = (float *)grads, .scale = 1.0f, .consume = false};
    step(st, params, &gr, lr);
}

void optim_step_consume(optim_state *st, float *params, float *grads, float grad_scale, float lr) {
    const optim_grads gr = {.g = grads, .scale = grad_scale, .consume = true};
    step(st, params, &gr, lr);
}
