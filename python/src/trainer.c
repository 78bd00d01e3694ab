/* snug._snug.Trainer: snug_trainer_new for a plan and a fixed run configuration (optimizer, schedule, clipping,
 * seed); evaluation, prediction, weights and states. Each long call runs with the GIL released. fit.c runs it. */
#include "trainer.h"

#include <stdlib.h>
#include <string.h>

/* Trainer(plan, optim: dict, schedule: (kind, warmup, min_ratio), clip=0, seed=1, shuffle=True,
 *         drop_last=False, max_nonfinite=10) */
static int trainer_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    py_trainer *t = (py_trainer *)self;
    static char *kw[] = {"plan", "optim", "schedule", "clip", "seed", "shuffle", "drop_last", "max_nonfinite",
                         NULL};
    PyObject *plan, *optim;
    const char *schedule = "constant";
    long warmup = 0;
    float min_ratio = 0, clip = 0;
    unsigned long long seed = 1;
    int shuffle = 1, drop_last = 0, max_nonfinite = 10;
    if (t->tr) {
        PyErr_SetString(PyExc_RuntimeError, "a Trainer is made once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!|(slf)fKppi", kw, &py_plan_type, &plan, &PyDict_Type, &optim,
                                     &schedule, &warmup, &min_ratio, &clip, &seed, &shuffle, &drop_last,
                                     &max_nonfinite))
        return -1;
    snug_train_config c = snug_train_config_default();
    if (!py_to_optim(optim, &c.optim)) return -1;
    if (strcmp(schedule, "cosine") == 0) c.schedule.kind = SNUG_SCHEDULE_COSINE;
    else if (strcmp(schedule, "constant") != 0) {
        PyErr_Format(PyExc_ValueError, "schedule '%s': constant or cosine", schedule);
        return -1;
    }
    c.schedule.warmup_steps = warmup, c.schedule.min_lr_ratio = min_ratio;
    c.clip_norm = clip, c.seed = seed, c.shuffle = shuffle, c.drop_last = drop_last, c.max_nonfinite = max_nonfinite;
    c.progress = py_fit_progress, c.on_eval = py_fit_on_eval, c.progress_user = t;
    c.stop = py_fit_stop_flag();
    snug_error err;
    snug_trainer *tr = NULL;
    snug_status st;
    const snug_plan *p = ((py_plan *)plan)->chosen;
    Py_BEGIN_ALLOW_THREADS /* reserving zeroes every byte of the plan */
    st = snug_trainer_new(p, &c, &tr, &err);
    Py_END_ALLOW_THREADS
    if (st != SNUG_OK) {
        py_raise(&err);
        return -1;
    }
    t->tr = tr, t->cfg = c, t->plan = Py_NewRef(plan);
    return 0;
}

static void trainer_dealloc(PyObject *self) {
    py_trainer *t = (py_trainer *)self;
    snug_trainer_free(t->tr);
    Py_XDECREF(t->plan);
    Py_XDECREF(t->eval_data);
    Py_XDECREF(t->callback);
    Py_XDECREF(t->callback_error);
    free(t->log_path), free(t->state_dir), free(t->state_extra);
    free(t->steps), free(t->evals);
    Py_TYPE(self)->tp_free(self);
}

static snug_trainer *ready(PyObject *self) {
    snug_trainer *tr = ((py_trainer *)self)->tr;
    if (!tr) PyErr_SetString(PyExc_RuntimeError, "the Trainer was not made (its __init__ failed)");
    return tr;
}

static PyObject *eval_dict(const snug_eval_result *r) {
    return Py_BuildValue("{s:d,s:d,s:n,s:d,s:d,s:d}", "loss", r->loss, "accuracy", r->accuracy, "items",
                         (Py_ssize_t)r->items, "bits", r->bits, "mean_iou", r->mean_iou, "foreground_iou",
                         r->foreground_iou);
}

static PyObject *trainer_evaluate(PyObject *self, PyObject *data) {
    snug_trainer *tr = ready(self);
    if (!tr) return NULL;
    if (!PyObject_TypeCheck(data, &py_dataset_type)) return PyErr_Format(PyExc_TypeError, "a snug data set");
    snug_eval_result res;
    snug_error err;
    snug_status st;
    Py_BEGIN_ALLOW_THREADS
    st = snug_trainer_evaluate(tr, ((py_dataset *)data)->ds, &res, &err);
    Py_END_ALLOW_THREADS
    return st == SNUG_OK ? eval_dict(&res) : py_raise(&err);
}

/* predict(data, out): out a writable C-contiguous float32 buffer of size(data) x output elements. */
static PyObject *trainer_predict(PyObject *self, PyObject *args) {
    snug_trainer *tr = ready(self);
    PyObject *data, *out;
    if (!tr || !PyArg_ParseTuple(args, "O!O", &py_dataset_type, &data, &out)) return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(out, &v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return NULL;
    const snug_dataset *ds = ((py_dataset *)data)->ds;
    const snug_shape s = snug_graph_output_shape(((py_graph *)((py_plan *)((py_trainer *)self)->plan)->graph)->g);
    size_t per_sample = 1;
    for (int i = 0; i < s.rank; i++) per_sample *= s.dims[i];
    if ((size_t)v.len != snug_dataset_size(ds) * per_sample * sizeof(float)) {
        PyBuffer_Release(&v);
        return PyErr_Format(PyExc_ValueError, "the output holds %zd bytes, not the %zu of the logits",
                            v.len, snug_dataset_size(ds) * per_sample * sizeof(float));
    }
    snug_error err;
    snug_status st;
    Py_BEGIN_ALLOW_THREADS
    st = snug_trainer_predict(tr, ds, v.buf, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    if (st != SNUG_OK) return py_raise(&err);
    Py_RETURN_NONE;
}

/* Calls f(tr, path, err) with the GIL released: save, load, load_state. */
static PyObject *with_path(PyObject *self, PyObject *arg,
                           snug_status (*f)(snug_trainer *, const char *, snug_error *)) {
    snug_trainer *tr = ready(self);
    const char *path = tr ? PyUnicode_AsUTF8(arg) : NULL;
    if (!path) return NULL;
    snug_error err;
    snug_status st;
    Py_BEGIN_ALLOW_THREADS
    st = f(tr, path, &err);
    Py_END_ALLOW_THREADS
    if (st != SNUG_OK) return py_raise(&err);
    Py_RETURN_NONE;
}

static snug_status save(snug_trainer *tr, const char *path, snug_error *err) { return snug_trainer_save(tr, path, err); }

static PyObject *trainer_save(PyObject *self, PyObject *arg) { return with_path(self, arg, save); }
static PyObject *trainer_load(PyObject *self, PyObject *arg) { return with_path(self, arg, snug_trainer_load); }
static PyObject *trainer_load_state(PyObject *self, PyObject *arg) {
    return with_path(self, arg, snug_trainer_load_state);
}

/* save_state(dir, keep=2, extra=None) -> the file written */
static PyObject *trainer_save_state(PyObject *self, PyObject *args) {
    snug_trainer *tr = ready(self);
    const char *dir, *extra = NULL;
    int keep = 2;
    if (!tr || !PyArg_ParseTuple(args, "s|iz", &dir, &keep, &extra)) return NULL;
    char path[4096];
    snug_error err;
    snug_status st;
    Py_BEGIN_ALLOW_THREADS
    st = snug_trainer_save_state(tr, dir, keep, extra, path, sizeof path, &err);
    Py_END_ALLOW_THREADS
    return st == SNUG_OK ? PyUnicode_FromString(path) : py_raise(&err);
}

/* [(name, memoryview of its float32 values)] in graph order: views of the trainer's memory, valid while the
 * trainer lives and no step runs (snug/trainer.py copies them at once). */
static PyObject *trainer_param_views(PyObject *self, PyObject *unused) {
    (void)unused;
    snug_trainer *tr = ready(self);
    if (!tr) return NULL;
    const size_t n = snug_trainer_param_count(tr);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        size_t numel;
        float *values;
        const char *name = snug_trainer_param(tr, i, &numel, &values, NULL);
        PyObject *view = PyMemoryView_FromMemory((char *)values, (Py_ssize_t)(numel * sizeof *values), PyBUF_WRITE);
        PyObject *item = view ? Py_BuildValue("(sN)", name, view) : NULL;
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyObject *trainer_memory(PyObject *self, PyObject *unused) {
    (void)unused;
    snug_trainer *tr = ready(self);
    if (!tr) return NULL;
    snug_mem_report r;
    snug_trainer_memory(tr, &r);
    return Py_BuildValue("{s:n,s:n,s:n}", "budget", (Py_ssize_t)r.budget, "total", (Py_ssize_t)r.total, "peak",
                         (Py_ssize_t)r.peak);
}

static PyMethodDef trainer_methods[] = {
    {"fit", (PyCFunction)(void (*)(void))py_trainer_fit, METH_VARARGS | METH_KEYWORDS,
     "fit(data, epochs, steps, eval_data, eval_every, log, state, state_every, state_every_seconds, state_keep, "
     "state_extra, callback, progress, catch_sigint) -> True when Ctrl-C stopped it."},
    {"history", py_trainer_history, METH_NOARGS, "([steps], [evaluations]) of the last fit."},
    {"evaluate", trainer_evaluate, METH_O, "evaluate(data) -> {loss, accuracy, items, ...}."},
    {"predict", trainer_predict, METH_VARARGS, "predict(data, out): the logits of every sample into out."},
    {"save", trainer_save, METH_O, "save(path): the weights as safetensors."},
    {"load", trainer_load, METH_O, "load(path): weights from a safetensors file."},
    {"save_state", trainer_save_state, METH_VARARGS, "save_state(dir, keep=2, extra=None) -> the file."},
    {"load_state", trainer_load_state, METH_O, "load_state(path): continue the run of a state file."},
    {"param_views", trainer_param_views, METH_NOARGS, "[(name, memoryview)] of the parameters, in graph order."},
    {"memory", trainer_memory, METH_NOARGS, "{budget, total, peak}: what the trainer holds."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject py_trainer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "snug._snug.Trainer",
    .tp_basicsize = sizeof(py_trainer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Trainer(plan, optim, schedule, clip, seed, shuffle, drop_last, max_nonfinite).",
    .tp_new = PyType_GenericNew,
    .tp_init = trainer_init,
    .tp_dealloc = trainer_dealloc,
    .tp_methods = trainer_methods,
};

/* state_info(path_or_dir) -> what the newest valid state of a folder (or the state file) holds */
static PyObject *state_info(PyObject *self, PyObject *arg) {
    (void)self;
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path) return NULL;
    snug_state_info *i = calloc(1, sizeof *i);
    if (!i) return PyErr_NoMemory();
    snug_error err;
    snug_status st;
    Py_BEGIN_ALLOW_THREADS
    st = snug_state_latest(path, i, &err);
    if (st == SNUG_E_IO) st = snug_state_read(path, i, &err); /* a file rather than a folder */
    Py_END_ALLOW_THREADS
    PyObject *r = NULL;
    if (st != SNUG_OK) py_raise(&err);
    else {
        const snug_train_config *c = &i->run;
        r = Py_BuildValue("{s:s,s:s,s:n,s:s,s:l,s:l,s:s,s:l,s:l,s:K,s:O,s:O,s:f,s:i,s:{s:s,s:f,s:f,s:O,s:f,s:f,s:f,"
                          "s:f},s:(slf)}",
                          "path", i->path, "model", i->model, "batch", (Py_ssize_t)i->batch, "precision",
                          snug_precision_name(i->precision), "step", i->step, "epoch", i->epoch, "extra",
                          i->extra ? i->extra : "", "epochs", c->epochs, "max_steps", c->max_steps, "seed",
                          (unsigned long long)c->seed, "shuffle", c->shuffle ? Py_True : Py_False, "drop_last",
                          c->drop_last ? Py_True : Py_False, "clip", (double)c->clip_norm, "max_nonfinite",
                          c->max_nonfinite, "optim", "kind", c->optim.kind == SNUG_OPTIM_ADAMW ? "adamw" : "sgd",
                          "lr", (double)c->optim.lr, "momentum", (double)c->optim.momentum, "nesterov",
                          c->optim.nesterov ? Py_True : Py_False, "weight_decay", (double)c->optim.weight_decay,
                          "beta1", (double)c->optim.beta1, "beta2", (double)c->optim.beta2, "eps",
                          (double)c->optim.eps, "schedule",
                          c->schedule.kind == SNUG_SCHEDULE_COSINE ? "cosine" : "constant",
                          c->schedule.warmup_steps, (double)c->schedule.min_lr_ratio);
    }
    snug_state_info_free(i);
    free(i);
    return r;
}

PyMethodDef py_trainer_functions[] = {
    {"state_info", state_info, METH_O, "What the newest valid state of a folder (or a state file) holds."},
    {NULL, NULL, 0, NULL},
};
