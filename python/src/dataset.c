/* snug._snug.Dataset: a library data set. Borrowed arrays (snug_dataset_borrow_arrays: the buffers stay
 * exported, so neither moves nor shrinks while the data set reads them), MNIST, CSV tables, image folders; a
 * Python object's samples come through source.c. */
#include "ext.h"

#include <stdio.h>
#include <string.h>

static py_dataset *dataset_new(void) { return PyObject_New(py_dataset, &py_dataset_type); }

static void dataset_dealloc(PyObject *self) {
    py_dataset *o = (py_dataset *)self;
    snug_dataset *ds = o->ds;
    o->ds = NULL;
    /* a data set of callbacks may call close (which takes the GIL) from here: we hold it, so that is re-entry */
    snug_dataset_free(ds);
    for (int i = 0; i < o->n_views; i++) PyBuffer_Release(&o->views[i]);
    Py_XDECREF(o->keep);
    PyObject_Free(self);
}

/* A data set made by open(), wrapped; its error raised. */
static PyObject *wrap(snug_status st, snug_dataset *ds, const snug_error *err) {
    if (st != SNUG_OK) return py_raise(err);
    py_dataset *o = dataset_new();
    if (!o) {
        snug_dataset_free(ds);
        return NULL;
    }
    o->ds = ds, o->keep = NULL, o->n_views = 0, o->source = false;
    return (PyObject *)o;
}

/* A C-contiguous buffer of `format` items (4 bytes each); else a TypeError that says how to convert. */
static bool borrow_view(PyObject *obj, const char *what, const char *format, const char *dtype, Py_buffer *v) {
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous array of %s (numpy.ascontiguousarray(%s, "
                     "dtype=numpy.%s) makes one, a copy)", what, dtype, what, dtype);
        return false;
    }
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    const bool same = v->itemsize == 4 && strcmp(f, format) == 0;
    if (!same || v->ndim < 1) {
        PyBuffer_Release(v);
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous array of %s with a sample dimension first, not "
                     "format '%s' with %d dimensions (numpy.ascontiguousarray(%s, dtype=numpy.%s) converts it, a "
                     "copy)", what, dtype, v->format ? v->format : "B", v->ndim, what, dtype);
        return false;
    }
    return true;
}

/* arrays(x, y, classes): x (n, sample...) float32, y (n, targets...) int32, both borrowed. */
static PyObject *dataset_arrays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *y;
    Py_ssize_t classes;
    if (!PyArg_ParseTuple(args, "OOn", &x, &y, &classes)) return NULL;
    Py_buffer vx, vy;
    if (!borrow_view(x, "x", "f", "float32", &vx)) return NULL;
    if (!borrow_view(y, "y", "i", "int32", &vy)) {
        PyBuffer_Release(&vx);
        return NULL;
    }
    snug_shape sample = {.rank = vx.ndim - 1};
    size_t per_sample = 1;
    for (int i = 1; i < vx.ndim && i <= SNUG_MAX_DIMS; i++) sample.dims[i - 1] = (size_t)vx.shape[i];
    for (int i = 1; i < vy.ndim; i++) per_sample *= (size_t)vy.shape[i];
    if (sample.rank == 0) sample = (snug_shape){.rank = 1, .dims = {1}};
    snug_error err = {0};
    snug_dataset *ds = NULL;
    snug_status st = SNUG_OK;
    if (vx.ndim - 1 > SNUG_MAX_DIMS)
        st = SNUG_E_SHAPE, snprintf(err.message, sizeof err.message, "x has %d dimensions per sample: at most %d",
                                    vx.ndim - 1, SNUG_MAX_DIMS);
    else if (vx.shape[0] != vy.shape[0])
        st = SNUG_E_SHAPE, snprintf(err.message, sizeof err.message, "x has %zd samples but y has %zd: one target "
                                    "row per sample", vx.shape[0], vy.shape[0]);
    else if (classes <= 0)
        st = SNUG_E_ARG, snprintf(err.message, sizeof err.message, "classes %zd: at least 1", classes);
    else
        st = snug_dataset_borrow_arrays(vx.buf, sample, vy.buf, per_sample, (size_t)vx.shape[0], (size_t)classes,
                                        &ds, &err);
    err.status = st;
    py_dataset *o = st == SNUG_OK ? (py_dataset *)wrap(st, ds, &err) : NULL;
    if (!o) {
        PyBuffer_Release(&vx);
        PyBuffer_Release(&vy);
        return st == SNUG_OK ? NULL : py_raise(&err);
    }
    o->views[0] = vx, o->views[1] = vy, o->n_views = 2;
    o->keep = Py_BuildValue("(OO)", x, y);
    return (PyObject *)o;
}

static PyObject *dataset_mnist(PyObject *self, PyObject *args) {
    (void)self;
    const char *dir;
    int train = 1;
    Py_ssize_t pad = 0;
    if (!PyArg_ParseTuple(args, "s|pn", &dir, &train, &pad)) return NULL;
    snug_error err;
    snug_dataset *ds = NULL;
    snug_status st = pad > 0 ? snug_mnist_open_padded(dir, train, (size_t)pad, &ds, &err)
                             : snug_mnist_open(dir, train, &ds, &err);
    return wrap(st, ds, &err);
}

/* csv(path, label=None, standardise=True, stats_from=None) */
static PyObject *dataset_csv(PyObject *self, PyObject *args) {
    (void)self;
    const char *path, *label = NULL;
    int standardise = 1;
    PyObject *from = Py_None;
    if (!PyArg_ParseTuple(args, "s|zpO", &path, &label, &standardise, &from)) return NULL;
    if (from != Py_None && !PyObject_TypeCheck(from, &py_dataset_type))
        return PyErr_Format(PyExc_TypeError, "stats_from must be a data set of snug.data.csv");
    snug_csv_options o = {.label = label, .standardise = standardise,
                          .stats_from = from == Py_None ? NULL : ((py_dataset *)from)->ds};
    snug_error err;
    snug_dataset *ds = NULL;
    snug_status st = snug_csv_open(path, &o, &ds, &err);
    return wrap(st, ds, &err);
}

/* images(dir, shape, classes=None): shape (C, H, W), classes a list of names to expect. */
static PyObject *dataset_images(PyObject *self, PyObject *args) {
    (void)self;
    const char *dir;
    PyObject *shape, *classes = Py_None;
    if (!PyArg_ParseTuple(args, "sO|O", &dir, &shape, &classes)) return NULL;
    snug_image_folder_options o = {.resize = SNUG_RESIZE_AUTO};
    if (!py_to_shape(shape, &o.input)) return NULL;
    PyObject *fast = classes == Py_None ? NULL : PySequence_Fast(classes, "classes is a list of names");
    if (classes != Py_None && !fast) return NULL;
    const Py_ssize_t n = fast ? PySequence_Fast_GET_SIZE(fast) : 0;
    const char **names = fast ? PyMem_Calloc((size_t)n + 1, sizeof *names) : NULL;
    for (Py_ssize_t i = 0; names && i < n; i++)
        if (!(names[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, i)))) {
            PyMem_Free(names), names = NULL;
        }
    PyObject *result = NULL;
    if (!fast || names) {
        o.classes = names, o.class_count = (size_t)n;
        snug_error err;
        snug_dataset *ds = NULL;
        snug_status st;
        Py_BEGIN_ALLOW_THREADS /* every file is decoded once, over the engine's threads */
        st = snug_image_folder_open(dir, &o, &ds, &err);
        Py_END_ALLOW_THREADS
        result = wrap(st, ds, &err);
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    PyMem_Free(names);
    Py_XDECREF(fast);
    return result;
}

static PyObject *dataset_len(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(snug_dataset_size(((py_dataset *)self)->ds));
}

static PyObject *dataset_shape(PyObject *self, void *unused) {
    (void)unused;
    const snug_shape s = snug_dataset_sample_shape(((py_dataset *)self)->ds);
    return py_from_shape(&s);
}

static PyObject *dataset_classes(PyObject *self, void *unused) {
    (void)unused;
    return PyLong_FromSize_t(snug_dataset_classes(((py_dataset *)self)->ds));
}

static PyObject *dataset_class_names(PyObject *self, void *unused) {
    (void)unused;
    const snug_dataset *ds = ((py_dataset *)self)->ds;
    const size_t n = snug_dataset_classes(ds);
    if (n == 0 || !snug_dataset_class_name(ds, 0)) Py_RETURN_NONE;
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *s = PyUnicode_FromString(snug_dataset_class_name(ds, i));
        if (!s) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    return list;
}

static PyObject *dataset_subset(PyObject *self, PyObject *arg) {
    const Py_ssize_t count = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (count <= 0) return PyErr_Format(PyExc_ValueError, "a subset of %zd samples: at least 1", count);
    snug_error err;
    snug_dataset *ds = NULL;
    snug_status st = snug_dataset_subset(((py_dataset *)self)->ds, (size_t)count, &ds, &err);
    py_dataset *o = (py_dataset *)wrap(st, ds, &err);
    if (o) o->keep = Py_NewRef(self); /* the view reads self */
    return (PyObject *)o;
}

static PyGetSetDef dataset_getset[] = {
    {"sample_shape", dataset_shape, NULL, "The per-sample shape.", NULL},
    {"classes", dataset_classes, NULL, "The class count.", NULL},
    {"class_names", dataset_class_names, NULL, "The class names, when the data set names them; else None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dataset_methods[] = {
    {"size", dataset_len, METH_NOARGS, "The number of samples."},
    {"subset", dataset_subset, METH_O, "A view of `count` evenly spaced samples."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject py_dataset_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "snug._snug.Dataset",
    .tp_basicsize = sizeof(py_dataset),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A data set of the library; made by snug.data's functions.",
    .tp_dealloc = dataset_dealloc,
    .tp_getset = dataset_getset,
    .tp_methods = dataset_methods,
};

PyObject *py_dataset_source(PyObject *self, PyObject *args);

PyMethodDef py_dataset_functions[] = {
    {"dataset_arrays", dataset_arrays, METH_VARARGS, "arrays(x, y, classes): borrows the arrays, no copy."},
    {"dataset_mnist", dataset_mnist, METH_VARARGS, "mnist(dir, train=True, pad=0)."},
    {"dataset_csv", dataset_csv, METH_VARARGS, "csv(path, label=None, standardise=True, stats_from=None)."},
    {"dataset_images", dataset_images, METH_VARARGS, "images(dir, shape, classes=None)."},
    {"dataset_source", py_dataset_source, METH_VARARGS,
     "source(fetch, size, sample_shape, targets_per_sample, classes): samples from fetch(indices) -> (x, y)."},
    {NULL, NULL, 0, NULL},
};
