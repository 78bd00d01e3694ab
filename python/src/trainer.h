/* snug._snug.Trainer's object, shared by trainer.c (making it, saving, loading, scoring) and fit.c (the run:
 * history, progress, the callback, Ctrl-C). */
#ifndef SNUG_PY_TRAINER_H
#define SNUG_PY_TRAINER_H

#include "ext.h"

/* One optimizer step, as the history keeps it. */
typedef struct step_row {
    long step, epoch;
    double loss, samples_per_s, elapsed_s;
    float lr, grad_norm;
    size_t items;
    bool skipped;
} step_row;

/* One evaluation during fit. */
typedef struct eval_row {
    long step;
    double loss, accuracy, mean_iou;
    size_t items;
} eval_row;

typedef struct py_trainer {
    PyObject_HEAD
    snug_trainer *tr;
    PyObject *plan;          /* the py_plan the trainer runs (it points into it) */
    PyObject *eval_data;     /* the py_dataset the configuration points to, or NULL */
    snug_train_config cfg;   /* optimizer, schedule, clipping, seed: fixed; each fit adds its own fields */
    char *log_path, *state_dir, *state_extra; /* copies the configuration points to */
    /* the fit in progress or last run (grown without the GIL) */
    step_row *steps;
    size_t n_steps, cap_steps;
    eval_row *evals;
    size_t n_evals, cap_evals;
    bool out_of_memory;      /* a history row could not be kept */
    PyObject *callback;      /* called with the GIL after each step, or NULL */
    PyObject *callback_error; /* what the callback raised: fit stops and re-raises it */
    int print_progress;      /* a live line on stderr */
} py_trainer;

/* fit.c: the run's callbacks for the configuration, and the methods fit and history. */
bool py_fit_progress(const snug_step_stats *st, void *user);
bool py_fit_on_eval(const snug_step_stats *st, const snug_eval_result *res, void *user);
const volatile sig_atomic_t *py_fit_stop_flag(void);
PyObject *py_trainer_fit(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *py_trainer_history(PyObject *self, PyObject *unused);

/* plan.c: {kind, lr, momentum, nesterov, weight_decay, beta1, beta2, eps} into o (defaults for what is absent). */
bool py_to_optim(PyObject *dict, snug_optim_config *o);

#endif
