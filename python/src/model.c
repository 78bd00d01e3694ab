/* snug._snug.Graph: a model's graph (snug_model_builtin_classes: a zoo name, or a model file), its input and
 * output shapes and its parameters' names and shapes. */
#include "ext.h"

static int graph_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    py_graph *o = (py_graph *)self;
    static char *kw[] = {"name_or_path", "classes", NULL};
    const char *name;
    Py_ssize_t classes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|n", kw, &name, &classes)) return -1;
    if (classes < 0) {
        PyErr_SetString(PyExc_ValueError, "classes must be >= 0 (0: the model's own)");
        return -1;
    }
    snug_error err;
    snug_graph *g = NULL;
    snug_status st = snug_model_builtin_classes(name, (size_t)classes, &g, &err);
    if (st == SNUG_OK) st = snug_graph_check(g, &err);
    if (st != SNUG_OK) {
        snug_graph_free(g);
        py_raise(&err);
        return -1;
    }
    snug_graph_free(o->g);
    o->g = g;
    return 0;
}

static void graph_dealloc(PyObject *self) {
    snug_graph_free(((py_graph *)self)->g);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *graph_name(PyObject *self, void *unused) {
    (void)unused;
    return PyUnicode_FromString(snug_graph_name(((py_graph *)self)->g));
}

static PyObject *graph_input_shape(PyObject *self, void *unused) {
    (void)unused;
    const snug_shape s = snug_graph_input_shape(((py_graph *)self)->g);
    return py_from_shape(&s);
}

static PyObject *graph_output_shape(PyObject *self, void *unused) {
    (void)unused;
    const snug_shape s = snug_graph_output_shape(((py_graph *)self)->g);
    return py_from_shape(&s);
}

/* [(name, shape, trainable)] in graph order. */
static PyObject *graph_params(PyObject *self, PyObject *unused) {
    (void)unused;
    const snug_graph *g = ((py_graph *)self)->g;
    const size_t n = snug_graph_param_count(g);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        snug_shape s;
        bool trainable;
        const char *name = snug_graph_param(g, i, &s, &trainable);
        PyObject *shape = py_from_shape(&s);
        PyObject *item = shape ? Py_BuildValue("(sNO)", name, shape, trainable ? Py_True : Py_False) : NULL;
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyGetSetDef graph_getset[] = {
    {"name", graph_name, NULL, "The model's name.", NULL},
    {"input_shape", graph_input_shape, NULL, "The per-sample input shape.", NULL},
    {"output_shape", graph_output_shape, NULL, "The per-sample logits shape the loss reads.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef graph_methods[] = {
    {"params", graph_params, METH_NOARGS, "[(name, shape, trainable)] in graph order."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject py_graph_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "snug._snug.Graph",
    .tp_basicsize = sizeof(py_graph),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Graph(name_or_path, classes=0): a built-in model or a model file, checked.",
    .tp_new = PyType_GenericNew,
    .tp_init = graph_init,
    .tp_dealloc = graph_dealloc,
    .tp_getset = graph_getset,
    .tp_methods = graph_methods,
};

PyMethodDef py_graph_functions[] = {{NULL, NULL, 0, NULL}};
