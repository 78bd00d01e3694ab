/* snug._snug.Plan: snug_plan_new for a request built as `snug train` builds it (snug_plan_request_for_data over
 * the data set given, or none), kept with its candidates (snug_plan_set) for the table and the text of `snug
 * plan`. A request that does not fit raises the registered OutOfBudget with the shortfall's figures. */
#define _POSIX_C_SOURCE 200809L
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PyObject *out_of_budget;  /* snug.OutOfBudget, registered by snug/errors.py */

static PyObject *set_out_of_budget(PyObject *self, PyObject *cls) {
    (void)self;
    Py_XSETREF(out_of_budget, Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyObject *category_bytes(const size_t *bytes) {
    PyObject *d = PyDict_New();
    for (int c = 0; d && c < SNUG_MEM_NCATEGORIES; c++) {
        PyObject *v = PyLong_FromSize_t(bytes[c]);
        if (!v || PyDict_SetItemString(d, snug_mem_category_name((snug_mem_category)c), v) < 0) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *raise_shortfall(const snug_plan_shortfall *why, const snug_error *err) {
    if (!out_of_budget || why->smallest_budget == 0) return py_raise(err);
    PyObject *exc = PyObject_CallFunction(out_of_budget, "s", err->message);
    PyObject *bytes = category_bytes(why->bytes);
    PyObject *fields = bytes ? Py_BuildValue("{s:n,s:N,s:n,s:n,s:n,s:n,s:n}", "needed", (Py_ssize_t)why->needed,
                                             "bytes", bytes, "budget", (Py_ssize_t)why->budget, "fixed",
                                             (Py_ssize_t)why->fixed, "largest_micro_batch",
                                             (Py_ssize_t)why->largest_micro_batch, "largest_with_recompute",
                                             (Py_ssize_t)why->largest_with_recompute, "smallest_budget",
                                             (Py_ssize_t)why->smallest_budget) : NULL;
    if (exc && fields && PyObject_SetAttrString(exc, "shortfall", fields) == 0)
        PyErr_SetObject(out_of_budget, exc);
    Py_XDECREF(exc);
    Py_XDECREF(fields);
    return NULL;
}

bool py_to_optim(PyObject *d, snug_optim_config *o) {
    *o = snug_optim_config_default();
    const char *kind = "sgd";
    int nesterov = 0;
    static char *kw[] = {"kind", "lr", "momentum", "nesterov", "weight_decay", "beta1", "beta2", "eps", NULL};
    PyObject *empty = PyTuple_New(0);
    const bool ok = empty && PyArg_ParseTupleAndKeywords(empty, d, "|sffpffff", kw, &kind, &o->lr, &o->momentum,
                                                         &nesterov, &o->weight_decay, &o->beta1, &o->beta2, &o->eps);
    Py_XDECREF(empty);
    if (!ok) return false;
    o->nesterov = nesterov;
    if (strcmp(kind, "sgd") == 0) o->kind = SNUG_OPTIM_SGD;
    else if (strcmp(kind, "adamw") == 0) o->kind = SNUG_OPTIM_ADAMW;
    else return PyErr_Format(PyExc_ValueError, "optimizer kind '%s': sgd or adamw", kind), false;
    return true;
}

/* plan(graph, batch, micro_batch (0: auto), checkpoint (None: the default), budget (0: none), precision, optim
 * dict, data or None, prefetch (-1: as the data suits), products ("auto", "blas" or "snug")) */
static PyObject *plan_new(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *graph, *optim, *data;
    Py_ssize_t batch, micro, budget, prefetch;
    const char *checkpoint, *precision, *products;
    if (!PyArg_ParseTuple(args, "O!nnznsO!Ons", &py_graph_type, &graph, &batch, &micro, &checkpoint, &budget,
                          &precision, &PyDict_Type, &optim, &data, &prefetch, &products))
        return NULL;
    if (data != Py_None && !PyObject_TypeCheck(data, &py_dataset_type))
        return PyErr_Format(PyExc_TypeError, "data must be a snug data set (snug.data.*) or None");
    if (batch <= 0 || micro < 0 || budget < 0)
        return py_raise_status(SNUG_E_ARG, batch <= 0 ? "batch must be at least 1" : "micro_batch and mem must be "
                               "positive");
    snug_plan_request req = snug_plan_request_default((size_t)batch);
    snug_error err;
    req.micro_batch = micro == 0 ? SNUG_MICRO_BATCH_AUTO : (size_t)micro;
    req.budget = (size_t)budget;
    if (checkpoint && snug_parse_checkpoint(checkpoint, &req.checkpoint, &err) != SNUG_OK) return py_raise(&err);
    if (snug_parse_precision(precision, &req.precision, &err) != SNUG_OK) return py_raise(&err);
    if (snug_parse_products(products, &req.products, &err) != SNUG_OK) return py_raise(&err);
    if (!py_to_optim(optim, &req.optim)) return NULL;
    req.prefetch = prefetch < 0 ? SNUG_PREFETCH_BY_DATA : (size_t)prefetch;
    snug_data d = {.train = data == Py_None ? NULL : ((py_dataset *)data)->ds};
    snug_plan_request_for_data(&req, data == Py_None ? NULL : &d);
    snug_plan *chosen = NULL;
    snug_plan_set *set = NULL;
    snug_plan_shortfall why = {0};
    snug_status st;
    Py_BEGIN_ALLOW_THREADS
    st = snug_plan_new(((py_graph *)graph)->g, &req, &chosen, &why, &err);
    if (st == SNUG_OK) st = snug_plan_set_new(chosen, &set, &err);
    Py_END_ALLOW_THREADS
    if (st == SNUG_E_OOM && !set && !chosen) return raise_shortfall(&why, &err);
    if (st != SNUG_OK) return py_raise(&err);
    py_plan *p = PyObject_New(py_plan, &py_plan_type);
    if (!p) {
        snug_plan_set_free(set);
        return NULL;
    }
    p->set = set;
    p->chosen = snug_plan_set_at(set, snug_plan_set_chosen(set));
    p->graph = Py_NewRef(graph);
    p->data = data == Py_None ? NULL : Py_NewRef(data);
    return (PyObject *)p;
}

static void plan_dealloc(PyObject *self) {
    py_plan *p = (py_plan *)self;
    snug_plan_set_free(p->set);
    Py_XDECREF(p->graph);
    Py_XDECREF(p->data);
    PyObject_Free(self);
}

static PyObject *summary_dict(const snug_plan *plan) {
    snug_plan_summary s;
    char policy[64], checkpoint[32];
    snug_plan_summarize(plan, &s);
    snug_plan_policy_label(&s, policy, sizeof policy);
    snug_format_checkpoint(s.policy, checkpoint, sizeof checkpoint);
    const snug_plan_request *r = snug_plan_request_of(plan);
    return Py_BuildValue("{s:n,s:i,s:n,s:n,s:O,s:n,s:n,s:n,s:i,s:s,s:s,s:n,s:N,s:n,s:n,s:n,s:n,s:s,s:s,s:d,s:d,s:s,s:s,s:s}",
                         "batch", (Py_ssize_t)s.batch, "ranks", s.ranks, "share", (Py_ssize_t)s.share,
                         "micro_batch", (Py_ssize_t)s.micro_batch, "micro_batch_chosen",
                         s.micro_batch_chosen ? Py_True : Py_False, "micro_batches", (Py_ssize_t)s.micro_batches,
                         "last_micro_batch", (Py_ssize_t)s.last_micro_batch, "budget", (Py_ssize_t)s.budget,
                         "threads", s.threads, "checkpoint", policy, "policy", checkpoint, "segments",
                         (Py_ssize_t)s.segments, "bytes", category_bytes(s.bytes), "total", (Py_ssize_t)s.total,
                         "activation_peak", (Py_ssize_t)s.activation_peak, "live_peak", (Py_ssize_t)s.live_peak,
                         "peak_in_use", (Py_ssize_t)s.peak, "peak_layer", s.peak_op ? s.peak_op : "", "peak_phase", snug_phase_name(s.peak_phase),
                         "step_flops", s.step_flops, "recompute_percent", snug_plan_recompute_percent(&s),
                         "precision", snug_precision_name(r->precision), "products",
                         snug_products_name(r->products), "linear_product", s.products);
}

static PyObject *plan_summary(PyObject *self, PyObject *unused) {
    (void)unused;
    return summary_dict(((py_plan *)self)->chosen);
}

/* ([summary of every candidate], index of the chosen one) */
static PyObject *plan_candidates(PyObject *self, PyObject *unused) {
    (void)unused;
    const snug_plan_set *set = ((py_plan *)self)->set;
    const size_t n = snug_plan_set_count(set);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *row = summary_dict(snug_plan_set_at(set, i));
        if (!row) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, row);
    }
    return list ? Py_BuildValue("(Nn)", list, (Py_ssize_t)snug_plan_set_chosen(set)) : NULL;
}

/* text(title, buffers=False): what `snug plan` prints */
static PyObject *plan_text(PyObject *self, PyObject *args) {
    const char *title;
    int buffers = 0;
    if (!PyArg_ParseTuple(args, "s|p", &title, &buffers)) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return PyErr_NoMemory();
    snug_error err;
    const snug_status st = snug_plan_set_print(f, ((py_plan *)self)->set, title, buffers, &err);
    fclose(f);
    PyObject *r = st == SNUG_OK ? PyUnicode_FromStringAndSize(text, (Py_ssize_t)len) : py_raise(&err);
    free(text);
    return r;
}

/* json(title, buffers=False): `snug plan --json`'s document */
static PyObject *plan_json(PyObject *self, PyObject *args) {
    const char *title;
    int buffers = 0;
    if (!PyArg_ParseTuple(args, "s|p", &title, &buffers)) return NULL;
    char *text = snug_plan_set_json(((py_plan *)self)->set, title, buffers);
    if (!text) return PyErr_NoMemory();
    PyObject *r = PyUnicode_FromString(text);
    free(text);
    return r;
}

static PyObject *plan_timeline(PyObject *self, PyObject *args) {
    const char *title, *path;
    if (!PyArg_ParseTuple(args, "ss", &title, &path)) return NULL;
    const py_plan *p = (py_plan *)self;
    snug_error err;
    if (snug_plan_timeline_write(p->chosen, snug_plan_set_baseline(p->set), title, path, &err) != SNUG_OK)
        return py_raise(&err);
    Py_RETURN_NONE;
}

static PyMethodDef plan_methods[] = {
    {"summary", plan_summary, METH_NOARGS, "The chosen plan's figures."},
    {"candidates", plan_candidates, METH_NOARGS, "([figures of each candidate], chosen index)."},
    {"text", plan_text, METH_VARARGS, "text(title, buffers=False): the report of `snug plan`."},
    {"json", plan_json, METH_VARARGS, "json(title, buffers=False): the document of `snug plan --json`."},
    {"timeline", plan_timeline, METH_VARARGS, "timeline(title, path): the memory timeline, .svg or .csv."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject py_plan_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "snug._snug.Plan",
    .tp_basicsize = sizeof(py_plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A plan with its candidates; made by snug.plan.",
    .tp_dealloc = plan_dealloc,
    .tp_methods = plan_methods,
};

PyMethodDef py_plan_functions[] = {
    {"plan", plan_new, METH_VARARGS, "plan(graph, batch, micro_batch, checkpoint, budget, precision, optim, data, "
                                     "prefetch, products)"},
    {"_set_out_of_budget", set_out_of_budget, METH_O, "Registers the class raised for a plan over its budget."},
    {NULL, NULL, 0, NULL},
};
