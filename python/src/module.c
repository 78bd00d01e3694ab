/* The module snug._snug: its types, the exceptions of the library's statuses, and the few process-wide calls
 * (threads, the machine, the MPI job). */
#include "ext.h"

#include <string.h>

/* status -> exception class, filled once by snug/errors.py */
static PyObject *error_classes[SNUG_E_INTERRUPTED + 1];

PyObject *py_raise_status(snug_status status, const char *message) {
    PyObject *cls = (size_t)status < sizeof error_classes / sizeof *error_classes ? error_classes[status] : NULL;
    if (!cls) cls = PyExc_RuntimeError;
    PyErr_SetString(cls, message);
    return NULL;
}

PyObject *py_raise(const snug_error *err) { return py_raise_status(err->status, err->message); }

bool py_to_shape(PyObject *seq, snug_shape *out) {
    PyObject *fast = PySequence_Fast(seq, "a shape is a sequence of ints");
    if (!fast) return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    bool ok = n >= 1 && n <= SNUG_MAX_DIMS;
    if (!ok) PyErr_Format(PyExc_ValueError, "a sample shape has 1 to %d dimensions, not %zd", SNUG_MAX_DIMS, n);
    *out = (snug_shape){.rank = (int)n};
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        const Py_ssize_t d = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i), PyExc_OverflowError);
        ok = !(d == -1 && PyErr_Occurred());
        if (ok && d <= 0) ok = false, PyErr_Format(PyExc_ValueError, "dimension %zd of a sample shape is %zd: "
                                                   "each must be at least 1", i, d);
        if (ok) out->dims[i] = (size_t)d;
    }
    Py_DECREF(fast);
    return ok;
}

PyObject *py_from_shape(const snug_shape *s) {
    PyObject *t = PyTuple_New(s->rank);
    for (int i = 0; t && i < s->rank; i++) PyTuple_SET_ITEM(t, i, PyLong_FromSize_t(s->dims[i]));
    return t;
}

static PyObject *set_errors(PyObject *self, PyObject *table) {
    (void)self;
    if (!PyDict_Check(table)) return PyErr_Format(PyExc_TypeError, "_set_errors takes {status: class}");
    for (int s = 1; s <= SNUG_E_INTERRUPTED; s++) {
        PyObject *cls = PyDict_GetItemString(table, snug_status_name((snug_status)s));
        if (!cls) continue;
        Py_XSETREF(error_classes[s], Py_NewRef(cls));
    }
    Py_RETURN_NONE;
}

static PyObject *status_names(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    PyObject *list = PyList_New(0);
    for (int s = 1; list && s <= SNUG_E_INTERRUPTED; s++) {
        PyObject *name = PyUnicode_FromString(snug_status_name((snug_status)s));
        if (!name || PyList_Append(list, name) < 0) Py_CLEAR(list);
        Py_XDECREF(name);
    }
    return list;
}

static PyObject *model_names(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    PyObject *list = PyList_New(0);
    for (const char *const *n = snug_model_names(); list && *n; n++) {
        PyObject *name = PyUnicode_FromString(*n);
        if (!name || PyList_Append(list, name) < 0) Py_CLEAR(list);
        Py_XDECREF(name);
    }
    return list;
}

static PyObject *parse_size(PyObject *self, PyObject *arg) {
    (void)self;
    const char *text = PyUnicode_AsUTF8(arg);
    size_t bytes;
    snug_error err;
    if (!text) return NULL;
    if (snug_parse_size(text, &bytes, &err) != SNUG_OK) return py_raise(&err);
    return PyLong_FromSize_t(bytes);
}

static PyObject *format_bytes(PyObject *self, PyObject *arg) {
    (void)self;
    const size_t bytes = PyLong_AsSize_t(arg);
    char buf[32];
    if (bytes == (size_t)-1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(snug_format_bytes(bytes, buf, sizeof buf));
}

static PyObject *set_threads(PyObject *self, PyObject *arg) {
    (void)self;
    const long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    snug_set_threads((int)n);
    Py_RETURN_NONE;
}

static PyObject *system_info(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    snug_system_info i;
    snug_system_info_get(&i);
    return Py_BuildValue("{s:i,s:s,s:z,s:z,s:s,s:i,s:i}", "threads", i.threads, "simd", i.simd, "blas", i.blas,
                         "blas_kernel", i.blas_kernel, "gemm", i.gemm, "rank", snug_dist_rank(), "ranks",
                         snug_dist_size());
}

static PyObject *resident(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    size_t now, peak;
    if (!snug_process_resident(&now, &peak)) Py_RETURN_NONE;
    return Py_BuildValue("(nn)", (Py_ssize_t)now, (Py_ssize_t)peak);
}

static PyMethodDef module_functions[] = {
    {"_set_errors", set_errors, METH_O, "Registers the exception class of each status name."},
    {"status_names", status_names, METH_NOARGS, "The library's error status names."},
    {"model_names", model_names, METH_NOARGS, "The built-in model names."},
    {"parse_size", parse_size, METH_O, "Bytes of '64MiB', '1.5GiB', '500MB', '1000000'."},
    {"format_bytes", format_bytes, METH_O, "'44.00 MiB' for a byte count."},
    {"set_threads", set_threads, METH_O, "The engine's threads (<= 0: one per core); process-wide."},
    {"system_info", system_info, METH_NOARGS, "Threads, SIMD level, BLAS, matrix product, MPI rank and size."},
    {"resident", resident, METH_NOARGS, "(resident bytes now, peak) of this process, or None."},
    {NULL, NULL, 0, NULL},
};

static int add_functions(PyObject *m, PyMethodDef *defs) {
    for (; defs->ml_name; defs++) {
        PyObject *f = PyCFunction_NewEx(defs, NULL, PyModule_GetNameObject(m));
        if (!f || PyModule_AddObject(m, defs->ml_name, f) < 0) {
            Py_XDECREF(f);
            return -1;
        }
    }
    return 0;
}

static void leave_job(void) { snug_dist_finalize(); }

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_snug", "The C layer of snug: types over the library's public API (snug.h).", -1,
    module_functions, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__snug(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    PyTypeObject *types[] = {&py_graph_type, &py_dataset_type, &py_plan_type, &py_trainer_type};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(m, strrchr(types[i]->tp_name, '.') + 1,
                                                                (PyObject *)types[i]) < 0)
            goto fail;
    PyMethodDef *tables[] = {py_graph_functions, py_dataset_functions, py_plan_functions, py_trainer_functions};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
        if (add_functions(m, tables[i]) < 0) goto fail;
    /* joins the job when an MPI launcher started Python (mpirun -np 2 python3 train.py); else touches nothing.
     * The start-up waits at most the library's default rank timeout for the other ranks. */
    snug_error err;
    if (snug_dist_init(NULL, NULL, snug_train_config_default().rank_timeout_seconds, &err) != SNUG_OK) {
        PyErr_SetString(PyExc_RuntimeError, err.message);
        goto fail;
    }
    Py_AtExit(leave_job);
    if (PyModule_AddStringConstant(m, "version", SNUG_VERSION) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
