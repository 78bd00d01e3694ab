/* Optimizers, clipping and their state. The parameters and their gradients are each one contiguous block
 * (graph order), so an optimizer step, a clip and (later) an all-reduce are loops over one array. */
#ifndef SNUG_OPTIM_OPTIM_H
#define SNUG_OPTIM_OPTIM_H

#include "snug.h"

/* Number of float slots of optimizer state per parameter element: SGD 1 with momentum else 0, AdamW 2. */
int optim_state_slots(const snug_optim_config *cfg);

typedef struct optim_state {
    snug_optim_config cfg;
    float *state;   /* optim_state_slots * n floats, zero at start (SNUG_MEM_OPTIM) */
    size_t n;       /* parameter elements */
    long t;         /* optimizer steps taken: AdamW's bias correction counter */
} optim_state;

/* One step over params[0..n) with gradients grads at learning rate lr. Advances st->t. */
void optim_step(optim_state *st, float *params, const float *grads, float lr);

/* The trainer's step: the same update with every gradient multiplied by grad_scale as it is read (the clip
 * factor from grad_clip_factor: the same bits as grad_clip followed by optim_step), and grads left all zero,
 * ready for the next window, in the same pass over memory. */
void optim_step_consume(optim_state *st, float *params, float *grads, float grad_scale, float lr);

/* The global L2 norm of grads[0..n), computed in double. Not finite when any element is not. */
double grad_global_norm(const float *grads, size_t n);
/* The factor that brings a gradient of global norm `norm` to at most max_norm: max_norm / (norm + 1e-6) when
 * that is below 1, else 1; also 1 when clipping is off (max_norm <= 0 or NaN) or the norm is not finite. */
float grad_clip_factor(double norm, float max_norm);
/* Scales grads so that their global norm is at most max_norm (PyTorch's clip_grad_norm_: factor
 * max_norm / (norm + 1e-6), applied only when < 1). Returns the factor applied. */
float grad_clip(float *grads, size_t n, double norm, float max_norm);

#endif
