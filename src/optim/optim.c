/* The optimizer interface: how much state each optimizer needs, and one step dispatched by kind. */
#include <assert.h>

#include "optim/optim.h"
#include "optim/optim_impl.h"

int optim_state_slots(const snug_optim_config *cfg) {
    switch (cfg->kind) {
    case SNUG_OPTIM_SGD:   return cfg->momentum != 0.0f ? 1 : 0;
    case SNUG_OPTIM_ADAMW: return 2;
    }
    return 0;
}

void optim_step(optim_state *st, float *params, const float *grads, float lr) {
    assert(st->state != NULL || optim_state_slots(&st->cfg) == 0);
    /* The counter advances first, so that AdamW's bias correction sees t = 1 on the first step (as PyTorch's
     * state["step"]); for SGD it only counts steps. */
    st->t += 1;
    switch (st->cfg.kind) {
    case SNUG_OPTIM_SGD:   sgd_step(st, params, grads, lr); return;
    case SNUG_OPTIM_ADAMW: adamw_step(st, params, grads, lr); return;
    }
    assert(!"optim_step: unknown optimizer kind (the trainer validates the config before planning)");
}
