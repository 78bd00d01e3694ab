/* Trainer.fit: snug_trainer_fit with the GIL released. The library calls back after every optimizer step and
 * evaluation on the fitting thread: the history is kept in C (no GIL), the live line written straight to the
 * terminal, and only a Python callback takes the GIL. Ctrl-C: while fit runs (on the main thread) SIGINT sets
 * the configuration's stop flag, so the library finishes the step, writes the state when there is a folder and
 * returns SNUG_E_INTERRUPTED; Python's own handler is back before fit returns, and snug/trainer.py raises
 * KeyboardInterrupt. */
#define _POSIX_C_SOURCE 200809L
#include "trainer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_asked;

static void on_sigint(int sig) {
    (void)sig;
    stop_asked = 1;
}

const volatile sig_atomic_t *py_fit_stop_flag(void) { return &stop_asked; }

/* Room for one more row of n of size bytes in *rows (cap grows by doubling). */
static bool grow(void **rows, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return true;
    const size_t want = *cap ? 2 * *cap : 256;
    void *more = realloc(*rows, want * size);
    if (!more) return false;
    *rows = more, *cap = want;
    return true;
}

static void print_line(const snug_step_stats *st) {
    char rate[32], elapsed[32];
    snug_format_count(st->samples_per_s, rate, sizeof rate);
    snug_format_duration(st->elapsed_s, elapsed, sizeof elapsed);
    fprintf(stderr, "\rstep %ld/%ld | epoch %ld | loss %.4f | lr %.4g | %s samples/s | %s   ", st->step,
            st->total_steps, st->epoch + 1, st->loss, (double)st->lr, rate, elapsed);
    fflush(stderr);
}

/* Calls the Python callback with the step's figures, with the GIL; false (stop) when it raised. */
static bool call_back(py_trainer *t, const snug_step_stats *st) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *r = PyObject_CallFunction(t->callback, "{s:l,s:l,s:l,s:d,s:f,s:f,s:O,s:d,s:d}", "step", st->step,
                                        "epoch", st->epoch, "total_steps", st->total_steps, "loss", st->loss, "lr",
                                        (double)st->lr, "grad_norm", (double)st->grad_norm, "skipped",
                                        st->skipped ? Py_True : Py_False, "samples_per_s", st->samples_per_s,
                                        "elapsed_s", st->elapsed_s);
    const bool go_on = r && r != Py_False;
    if (!r) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        Py_XSETREF(t->callback_error, value);
        Py_XDECREF(type), Py_XDECREF(tb);
    }
    Py_XDECREF(r);
    PyGILState_Release(gil);
    return go_on;
}

bool py_fit_progress(const snug_step_stats *st, void *user) {
    py_trainer *t = user;
    if (grow((void **)&t->steps, &t->cap_steps, t->n_steps, sizeof *t->steps))
        t->steps[t->n_steps++] = (step_row){.step = st->step, .epoch = st->epoch, .loss = st->loss,
                                            .samples_per_s = st->samples_per_s, .elapsed_s = st->elapsed_s,
                                            .lr = st->lr, .grad_norm = st->grad_norm, .items = st->items,
                                            .skipped = st->skipped};
    else t->out_of_memory = true;
    if (t->print_progress) print_line(st);
    return t->callback ? call_back(t, st) : true;
}

bool py_fit_on_eval(const snug_step_stats *st, const snug_eval_result *res, void *user) {
    py_trainer *t = user;
    if (grow((void **)&t->evals, &t->cap_evals, t->n_evals, sizeof *t->evals))
        t->evals[t->n_evals++] = (eval_row){.step = st->step, .loss = res->loss, .accuracy = res->accuracy,
                                            .mean_iou = res->mean_iou, .items = res->items};
    else t->out_of_memory = true;
    return true;
}

/* A string argument kept as the configuration's (NULL for None). */
static bool keep_text(PyObject *obj, char **slot) {
    free(*slot);
    *slot = NULL;
    if (obj == Py_None) return true;
    const char *s = PyUnicode_AsUTF8(obj);
    if (s && !(*slot = strdup(s))) PyErr_NoMemory();
    return *slot != NULL;
}

/* fit(data, epochs=1, steps=0, eval_data=None, eval_every=0, log=None, state=None, state_every=0,
 *     state_every_seconds=600, state_keep=2, state_extra=None, callback=None, progress=False, catch_sigint=False)
 * -> True when Ctrl-C stopped it */
PyObject *py_trainer_fit(PyObject *self, PyObject *args, PyObject *kwargs) {
    py_trainer *t = (py_trainer *)self;
    static char *kw[] = {"data", "epochs", "steps", "eval_data", "eval_every", "log", "state", "state_every",
                         "state_every_seconds", "state_keep", "state_extra", "callback", "progress", "catch_sigint",
                         NULL};
    PyObject *data, *eval = Py_None, *log = Py_None, *state = Py_None, *extra = Py_None, *callback = Py_None;
    long epochs = 1, steps = 0, eval_every = 0, state_every = 0;
    double state_seconds = 600;
    int keep = 2, progress = 0, catch_sigint = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!|llOlOOldiOOpp", kw, &py_dataset_type, &data, &epochs, &steps,
                                     &eval, &eval_every, &log, &state, &state_every, &state_seconds, &keep, &extra,
                                     &callback, &progress, &catch_sigint))
        return NULL;
    if (eval != Py_None && !PyObject_TypeCheck(eval, &py_dataset_type))
        return PyErr_Format(PyExc_TypeError, "eval_data must be a snug data set or None");
    if (!keep_text(log, &t->log_path) || !keep_text(state, &t->state_dir) || !keep_text(extra, &t->state_extra))
        return NULL;
    snug_train_config c = t->cfg;
    c.epochs = steps > 0 ? 0 : epochs, c.max_steps = steps;
    c.eval_data = eval == Py_None ? NULL : ((py_dataset *)eval)->ds, c.eval_every = eval_every;
    c.log_path = t->log_path, c.state_dir = t->state_dir, c.state_extra = t->state_extra;
    c.state_every = state_every, c.state_every_seconds = state_seconds, c.state_keep = keep;
    snug_error err;
    if (snug_trainer_configure(t->tr, &c, &err) != SNUG_OK) return py_raise(&err);
    Py_XSETREF(t->eval_data, eval == Py_None ? NULL : Py_NewRef(eval));
    Py_XSETREF(t->callback, callback == Py_None ? NULL : Py_NewRef(callback));
    Py_CLEAR(t->callback_error);
    t->n_steps = t->n_evals = 0, t->out_of_memory = false, t->print_progress = progress;
    struct sigaction mine = {.sa_handler = on_sigint}, before;
    sigemptyset(&mine.sa_mask);
    stop_asked = 0;
    if (catch_sigint) sigaction(SIGINT, &mine, &before);
    snug_status st;
    const snug_dataset *ds = ((py_dataset *)data)->ds;
    Py_INCREF(data); /* read until fit returns, whatever the callback does */
    Py_BEGIN_ALLOW_THREADS
    st = snug_trainer_fit(t->tr, ds, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(data);
    if (catch_sigint) sigaction(SIGINT, &before, NULL);
    if (progress && t->n_steps) fputc('\n', stderr);
    if (t->callback_error) {
        PyObject *e = t->callback_error;
        t->callback_error = NULL;
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
        return NULL;
    }
    if (st == SNUG_E_INTERRUPTED && stop_asked) Py_RETURN_TRUE;
    if (st != SNUG_OK) return py_raise(&err);
    if (t->out_of_memory) return PyErr_NoMemory();
    Py_RETURN_FALSE;
}

/* ([step dicts], [evaluation dicts]) of the last fit. */
PyObject *py_trainer_history(PyObject *self, PyObject *unused) {
    (void)unused;
    const py_trainer *t = (py_trainer *)self;
    PyObject *steps = PyList_New((Py_ssize_t)t->n_steps), *evals = PyList_New((Py_ssize_t)t->n_evals);
    for (size_t i = 0; steps && evals && i < t->n_steps; i++) {
        const step_row *r = &t->steps[i];
        PyObject *d = Py_BuildValue("{s:l,s:l,s:d,s:f,s:f,s:O,s:n,s:d,s:d}", "step", r->step, "epoch", r->epoch,
                                    "loss", r->loss, "lr", (double)r->lr, "grad_norm", (double)r->grad_norm,
                                    "skipped", r->skipped ? Py_True : Py_False, "items", (Py_ssize_t)r->items,
                                    "samples_per_s", r->samples_per_s, "elapsed_s", r->elapsed_s);
        if (!d) Py_CLEAR(steps);
        else PyList_SET_ITEM(steps, (Py_ssize_t)i, d);
    }
    for (size_t i = 0; steps && evals && i < t->n_evals; i++) {
        const eval_row *r = &t->evals[i];
        PyObject *d = Py_BuildValue("{s:l,s:d,s:d,s:d,s:n}", "step", r->step, "loss", r->loss, "accuracy",
                                    r->accuracy, "mean_iou", r->mean_iou, "items", (Py_ssize_t)r->items);
        if (!d) Py_CLEAR(evals);
        else PyList_SET_ITEM(evals, (Py_ssize_t)i, d);
    }
    if (!steps || !evals) {
        Py_XDECREF(steps), Py_XDECREF(evals);
        return NULL;
    }
    return Py_BuildValue("(NN)", steps, evals);
}
