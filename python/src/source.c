/* A data set of Python samples (snug_dataset_from_source): the library asks for the samples of a micro-batch,
 * from its read-ahead thread or from the step, without the GIL; each callback takes the GIL, calls
 * fetch(indices) -> (x, y) (snug/data.py builds fetch over any object with __len__ and __getitem__: arrays of
 * the micro-batch's inputs as float32 and targets as int32), copies them out and lets the GIL go. The library asks
 * for inputs and targets separately, so one fetch serves both: the last micro-batch is kept until the other
 * half of it is asked for. */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct source {
    PyObject *fetch;
    size_t numel, per_sample;   /* floats and targets per sample */
    size_t *idx;                /* the micro-batch fetched last, n samples */
    size_t n, cap;
    float *x;
    int32_t *y;
} source;

/* The Python error as the library's message, then cleared. */
static void fail(snug_error *err, const char *what) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
    const char *name = type ? ((PyTypeObject *)type)->tp_name : "error";
    if (err) {
        err->status = SNUG_E_ARG;
        snprintf(err->message, sizeof err->message, "the Python data set's %s: %s: %s", what, name, msg ? msg : "?");
    }
    PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
}

/* Copies buffer obj (exactly want items of format f, 4 bytes each) to out. */
static bool copy_out(PyObject *obj, const char *f, size_t want, void *out, const char *what, snug_error *err) {
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return fail(err, what), false;
    const char *vf = v.format ? v.format : "B";
    if (*vf == '<' || *vf == '=' || *vf == '@') vf++;
    const bool ok = v.itemsize == 4 && strcmp(vf, f) == 0 && (size_t)v.len == want * 4;
    if (ok) memcpy(out, v.buf, want * 4);
    else PyErr_Format(PyExc_ValueError, "%zd bytes of format '%s', expected %zu items of '%s'", v.len, vf, want, f);
    PyBuffer_Release(&v);
    if (!ok) fail(err, what);
    return ok;
}

/* Makes the source's kept micro-batch the one at indices (fetching it unless it is already), with the GIL. */
static bool fetch(source *s, const size_t *indices, size_t n, snug_error *err) {
    if (n == s->n && memcmp(indices, s->idx, n * sizeof *indices) == 0) return true;
    if (n > s->cap) {
        free(s->idx), free(s->x), free(s->y);
        s->idx = malloc(n * sizeof *s->idx), s->x = malloc(n * s->numel * 4), s->y = malloc(n * s->per_sample * 4);
        s->cap = s->idx && s->x && s->y ? n : 0;
        if (!s->cap && err)
            err->status = SNUG_E_OOM, snprintf(err->message, sizeof err->message, "out of memory: the system "
                                               "refused a micro-batch of %zu Python samples", n);
        if (!s->cap) return false;
    }
    s->n = 0;
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) PyList_SET_ITEM(list, (Py_ssize_t)i, PyLong_FromSize_t(indices[i]));
    PyObject *pair = list ? PyObject_CallOneArg(s->fetch, list) : NULL;
    Py_XDECREF(list);
    PyObject *x = NULL, *y = NULL;
    bool ok = pair && PyArg_ParseTuple(pair, "OO", &x, &y);
    if (!ok) fail(err, "samples");
    ok = ok && copy_out(x, "f", n * s->numel, s->x, "inputs", err) &&
         copy_out(y, "i", n * s->per_sample, s->y, "targets", err);
    Py_XDECREF(pair);
    if (ok) memcpy(s->idx, indices, n * sizeof *indices), s->n = n;
    return ok;
}

static bool read_inputs(void *user, const size_t *indices, size_t n, float *inputs, snug_error *err) {
    source *s = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    const bool ok = fetch(s, indices, n, err);
    if (ok) memcpy(inputs, s->x, n * s->numel * sizeof *inputs);
    PyGILState_Release(gil);
    return ok;
}

static bool read_targets(void *user, const size_t *indices, size_t n, int32_t *targets, snug_error *err) {
    source *s = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    const bool ok = fetch(s, indices, n, err);
    if (ok) memcpy(targets, s->y, n * s->per_sample * sizeof *targets);
    PyGILState_Release(gil);
    return ok;
}

static void close_source(void *user) {
    source *s = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_XDECREF(s->fetch);
    PyGILState_Release(gil);
    free(s->idx), free(s->x), free(s->y), free(s);
}

/* source(fetch, size, sample_shape, targets_per_sample, classes) */
PyObject *py_dataset_source(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *fetch_fn, *shape;
    Py_ssize_t size, per_sample, classes;
    if (!PyArg_ParseTuple(args, "OnOnn", &fetch_fn, &size, &shape, &per_sample, &classes)) return NULL;
    snug_dataset_source src = {.read_inputs = read_inputs, .read_targets = read_targets, .close = close_source};
    if (!py_to_shape(shape, &src.sample_shape)) return NULL;
    if (size <= 0 || per_sample <= 0 || classes <= 0)
        return PyErr_Format(PyExc_ValueError, "a data set of %zd samples, %zd targets each, %zd classes: each must "
                            "be at least 1", size, per_sample, classes);
    source *s = calloc(1, sizeof *s);
    if (!s) return PyErr_NoMemory();
    s->fetch = Py_NewRef(fetch_fn);
    s->numel = 1;
    for (int i = 0; i < src.sample_shape.rank; i++) s->numel *= src.sample_shape.dims[i];
    s->per_sample = (size_t)per_sample;
    src.size = (size_t)size, src.targets_per_sample = (size_t)per_sample, src.classes = (size_t)classes;
    src.user = s;
    snug_error err;
    snug_dataset *ds = NULL;
    if (snug_dataset_from_source(&src, &ds, &err) != SNUG_OK) {
        Py_DECREF(s->fetch);
        free(s);
        return py_raise(&err);
    }
    py_dataset *o = PyObject_New(py_dataset, &py_dataset_type);
    if (!o) {
        snug_dataset_free(ds);
        return NULL;
    }
    o->ds = ds, o->keep = NULL, o->n_views = 0, o->source = true;
    return (PyObject *)o;
}
