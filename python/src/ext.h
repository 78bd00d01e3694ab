/* The C extension snug._snug: thin Python types over include/snug.h (and nothing else of the library). Each
 * type owns one handle of the library and keeps a reference to the objects its handle points into, so that
 * Python's reference counting frees them in the order the library needs (a trainer before its plan, a plan
 * before its graph, a data set before the arrays it borrows). Every object is safe from one thread at a time. */
#ifndef SNUG_PY_EXT_H
#define SNUG_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "snug.h"

/* snug.Graph: a model's graph, built in or read from a model file. */
typedef struct py_graph {
    PyObject_HEAD
    snug_graph *g;
} py_graph;

/* snug.Dataset: a data set, and what it reads from (borrowed arrays, a Python object). */
typedef struct py_dataset {
    PyObject_HEAD
    snug_dataset *ds;
    PyObject *keep;   /* what ds reads from or borrows: kept alive as long as ds */
    Py_buffer views[2]; /* borrowed arrays (inputs, targets), released after ds is freed */
    int n_views;
    bool source;      /* read through Python callbacks (the read-ahead thread takes the GIL) */
} py_dataset;

/* snug.Plan: a chosen plan with the candidates around it (snug_plan_set). */
typedef struct py_plan {
    PyObject_HEAD
    snug_plan_set *set;
    const snug_plan *chosen;
    PyObject *graph;  /* the py_graph the plan points into */
    PyObject *data;   /* the py_dataset counted by the plan, or NULL */
} py_plan;

extern PyTypeObject py_graph_type, py_dataset_type, py_plan_type, py_trainer_type;

/* Raises the Python exception of err->status (registered by snug/errors.py through _set_errors) with the
 * library's message; returns NULL. */
PyObject *py_raise(const snug_error *err);
/* The same for a status and a message made here. */
PyObject *py_raise_status(snug_status status, const char *message);

/* "(C, H, W)" of a Python sequence of 1 to SNUG_MAX_DIMS positive ints; false with TypeError/ValueError set. */
bool py_to_shape(PyObject *seq, snug_shape *out);
PyObject *py_from_shape(const snug_shape *s);

/* Each type file's module functions, added to the module's table. */
extern PyMethodDef py_graph_functions[], py_dataset_functions[], py_plan_functions[], py_trainer_functions[];

#endif
