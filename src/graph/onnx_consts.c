/* The constants of an ONNX graph: initializers and Constant nodes read into float or int64 arrays (every size
 * checked against the data, since the file is untrusted), and the constant sub-graphs exporters emit around a
 * Reshape (Shape -> Gather -> Unsqueeze -> Concat) folded at load, so that snug's graph holds only the ops it
 * trains. Shape's batch dimension folds to ONNX_BATCH_DIM: the exported batch size is not snug's. */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "graph/onnx_import.h"

enum { DT_FLOAT = 1, DT_INT32 = 6, DT_INT64 = 7, DT_BOOL = 9 }; /* bool: Dropout's training_mode */

void onnx_const_free(onnx_const *c) {
    if (!c) return;
    free(c->f);
    free(c->i);
    free(c);
}

static bool dims_ok(size_t n, const int64_t *dims, size_t *numel);

/* A constant of that shape, zeroed; NULL for a bad shape (dims_ok) or when out of memory. */
static onnx_const *const_new(int rank, const int64_t *dims, bool is_float) {
    size_t numel;
    if (rank < 0 || !dims_ok((size_t)rank, dims, &numel)) return NULL;
    onnx_const *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->rank = rank;
    c->numel = numel;
    for (int d = 0; d < rank; d++) c->dims[d] = dims[d];
    if (is_float) c->f = calloc(c->numel ? c->numel : 1, sizeof *c->f);
    else c->i = calloc(c->numel ? c->numel : 1, sizeof *c->i);
    if (!c->f && !c->i) return free(c), NULL;
    return c;
}

/* The dims of t checked: rank, non-negative, a product below 2^31 elements. */
static bool dims_ok(size_t n, const int64_t *dims, size_t *numel) {
    if (n > ONNX_MAX_RANK) return false;
    size_t total = 1;
    for (size_t d = 0; d < n; d++) {
        if (dims[d] < 0 || dims[d] > INT32_MAX || !size_mul(total, (size_t)dims[d], &total)) return false;
    }
    *numel = total;
    return total <= INT32_MAX;
}

/* Whether t holds the data of numel elements, checked before anything is allocated for them: a shape alone
 * (a few bytes of a hostile file) may declare two billion elements. */
static snug_status check_data(const onnx_ctx *cx, const Onnx__TensorProto *t, size_t numel, snug_error *err) {
    const char *name = t->name ? t->name : "?";
    const size_t width = t->data_type == DT_BOOL ? 1 : t->data_type == DT_INT64 ? 8 : 4;
    if (t->has_raw_data) {
        if (t->raw_data.len / width != numel || t->raw_data.len % width)
            return onnx_fail(cx, err, SNUG_E_FORMAT, "tensor '%s' holds %zu bytes of data for %zu elements of "
                             "%zu bytes: the file is damaged", name, t->raw_data.len, numel, width);
        return SNUG_OK;
    }
    const size_t have = t->data_type == DT_FLOAT ? t->n_float_data
                        : t->data_type == DT_INT64 ? t->n_int64_data : t->n_int32_data;
    if (have != numel)
        return onnx_fail(cx, err, SNUG_E_FORMAT, "tensor '%s' holds %zu values for %zu elements: the file is "
                         "damaged", name, have, numel);
    return SNUG_OK;
}

/* Copies t's data (check_data passed) into c. */
static void read_data(const Onnx__TensorProto *t, onnx_const *c) {
    if (t->has_raw_data) {
        const uint8_t *b = t->raw_data.data;
        for (size_t j = 0; j < c->numel; j++) { /* ONNX stores raw data little-endian, as this CPU does */
            if (t->data_type == DT_FLOAT) memcpy(&c->f[j], b + 4 * j, 4);
            else if (t->data_type == DT_INT64) memcpy(&c->i[j], b + 8 * j, 8);
            else if (t->data_type == DT_BOOL) c->i[j] = b[j] != 0;
            else {
                int32_t v;
                memcpy(&v, b + 4 * j, 4);
                c->i[j] = v;
            }
        }
        return;
    }
    for (size_t j = 0; j < c->numel; j++) {
        if (t->data_type == DT_FLOAT) c->f[j] = t->float_data[j];
        else if (t->data_type == DT_INT64) c->i[j] = t->int64_data[j];
        else c->i[j] = t->int32_data[j];
    }
}

snug_status onnx_const_from_tensor(const onnx_ctx *cx, const Onnx__TensorProto *t, onnx_const **out,
                                   snug_error *err) {
    *out = NULL;
    const char *name = t->name ? t->name : "?";
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return onnx_fail(cx, err, SNUG_E_ARG, "tensor '%s' keeps its data in an external file, which snug does "
                         "not read: export the model as one file (torch.onnx.export writes one below 2 GiB)", name);
    if (t->data_type != DT_FLOAT && t->data_type != DT_INT64 && t->data_type != DT_INT32 && t->data_type != DT_BOOL)
        return onnx_fail(cx, err, SNUG_E_ARG, "tensor '%s' has ONNX data type %d: snug takes float32 weights "
                         "and int64, int32 or bool shapes and flags (export the model in float32)", name, (int)t->data_type);
    size_t numel;
    if (!dims_ok(t->n_dims, t->dims, &numel))
        return onnx_fail(cx, err, SNUG_E_FORMAT, "tensor '%s' has a bad shape (rank %zu, at most %d; dimensions "
                         "from 0 to 2^31 - 1 and fewer than 2^31 elements)", name, t->n_dims, ONNX_MAX_RANK);
    const snug_status s = check_data(cx, t, numel, err);
    if (s != SNUG_OK) return s;
    onnx_const *c = const_new((int)t->n_dims, t->dims, t->data_type == DT_FLOAT);
    if (!c) return onnx_fail(cx, err, SNUG_E_OOM, "out of memory reading tensor '%s'", name);
    read_data(t, c);
    *out = c;
    return SNUG_OK;
}

/* ---- folding ---- */

static snug_status set_output(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_const *c, snug_error *err) {
    if (!c) return onnx_fail(cx, err, SNUG_E_ARG, "the folded constant has a bad shape (or the system is out "
                             "of memory)");
    onnx_value *v = n->n_output >= 1 && n->output[0] && *n->output[0] ? onnx_add(cx, n->output[0]) : NULL;
    if (!v) return onnx_const_free(c), onnx_fail(cx, err, SNUG_E_FORMAT, "the node has no output name");
    v->c = c;
    return SNUG_OK;
}

/* a's values in a new shape of as many elements (NULL otherwise: a folded Squeeze with bad axes) */
static onnx_const *const_copy(const onnx_const *a, int rank, const int64_t *dims) {
    size_t numel; /* checked before allocating: the new shape may declare billions */
    if (rank < 0 || !dims_ok((size_t)rank, dims, &numel) || numel != a->numel) return NULL;
    onnx_const *c = const_new(rank, dims, a->f != NULL);
    if (!c) return NULL;
    if (a->f) memcpy(c->f, a->f, a->numel * sizeof *a->f);
    else memcpy(c->i, a->i, a->numel * sizeof *a->i);
    return c;
}

static snug_status fold_constant(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    const Onnx__AttributeProto *a = onnx_attr(n, "value");
    if (a && a->t) {
        onnx_const *c;
        snug_status s = onnx_const_from_tensor(cx, a->t, &c, err);
        return s != SNUG_OK ? s : set_output(cx, n, c, err);
    }
    if ((a = onnx_attr(n, "value_ints")) != NULL || (a = onnx_attr(n, "value_int")) != NULL) {
        const bool many = a->n_ints > 0 || strcmp(a->name, "value_ints") == 0;
        int64_t len = many ? (int64_t)a->n_ints : 1;
        onnx_const *c = const_new(many ? 1 : 0, &len, false);
        if (c) for (int64_t j = 0; j < len; j++) c->i[j] = many ? a->ints[j] : a->i;
        return set_output(cx, n, c, err);
    }
    if ((a = onnx_attr(n, "value_float")) != NULL) {
        onnx_const *c = const_new(0, NULL, true);
        if (c) c->f[0] = a->f;
        return set_output(cx, n, c, err);
    }
    return onnx_fail(cx, err, SNUG_E_ARG, "a Constant without a tensor, int or float value is not supported");
}

static snug_status fold_shape(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_value *x, snug_error *err) {
    int64_t full[ONNX_MAX_RANK + 1];
    int rank = 0;
    if (x->c) {
        for (int d = 0; d < x->c->rank; d++) full[rank++] = x->c->dims[d];
    } else {
        full[rank++] = ONNX_BATCH_DIM;
        for (int d = 0; d < x->shape.rank; d++) full[rank++] = (int64_t)x->shape.dims[d];
    }
    const Onnx__AttributeProto *as = onnx_attr(n, "start"), *ae = onnx_attr(n, "end");
    int64_t start = as ? as->i : 0, end = ae ? ae->i : rank;
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < start ? start : end > rank ? rank : end;
    int64_t len = end - start;
    onnx_const *c = const_new(1, &len, false);
    if (c) memcpy(c->i, full + start, (size_t)len * sizeof *c->i);
    return set_output(cx, n, c, err);
}

/* Gather over axis 0 of a constant of rank <= 1 with constant indices (a shape's entries). */
static snug_status fold_gather(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_const *data,
                               const onnx_const *idx, snug_error *err) {
    const Onnx__AttributeProto *ax = onnx_attr(n, "axis");
    if (data->rank != 1 || (ax && ax->i != 0 && ax->i != -1) || !idx->i || idx->rank > 1)
        return onnx_fail(cx, err, SNUG_E_ARG, "a constant Gather is folded only over a vector with int64 indices "
                         "of rank 0 or 1");
    onnx_const *c = const_new(idx->rank, idx->dims, data->f != NULL);
    for (size_t j = 0; c && j < idx->numel; j++) {
        int64_t k = idx->i[j] < 0 ? idx->i[j] + data->dims[0] : idx->i[j];
        if (k < 0 || k >= data->dims[0]) {
            onnx_const_free(c);
            return onnx_fail(cx, err, SNUG_E_FORMAT, "Gather index %lld is outside a vector of %lld entries",
                             (long long)idx->i[j], (long long)data->dims[0]);
        }
        if (data->f) c->f[j] = data->f[k];
        else c->i[j] = data->i[k];
    }
    return set_output(cx, n, c, err);
}

/* Unsqueeze and Squeeze change the dims only; their axes come from the second input (opset 13). */
static snug_status fold_squeeze(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_const *x,
                                const onnx_const *axes, bool unsqueeze, snug_error *err) {
    int64_t dims[ONNX_MAX_RANK];
    bool marked[ONNX_MAX_RANK + 1] = {false};
    const int out_rank = unsqueeze ? x->rank + (int)(axes ? axes->numel : 0) : x->rank;
    if (out_rank > ONNX_MAX_RANK || (axes && !axes->i))
        return onnx_fail(cx, err, SNUG_E_ARG, "bad axes for a constant %s", n->op_type);
    for (size_t j = 0; axes && j < axes->numel; j++) {
        int64_t a = axes->i[j] < 0 ? axes->i[j] + out_rank : axes->i[j];
        if (a < 0 || a >= out_rank) return onnx_fail(cx, err, SNUG_E_ARG, "axis %lld is out of range",
                                                     (long long)axes->i[j]);
        marked[a] = true;
    }
    int r = 0, k = 0;
    for (int d = 0; d < out_rank; d++) {
        if (unsqueeze) dims[r++] = marked[d] ? 1 : x->dims[k++];
        else if (!(axes ? marked[d] : x->dims[d] == 1)) dims[r++] = x->dims[d];
    }
    return set_output(cx, n, const_copy(x, r, dims), err);
}

static snug_status fold_concat(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_const *const *in, size_t n_in,
                               snug_error *err) {
    int64_t len = 0;
    for (size_t j = 0; j < n_in; j++) {
        if (in[j]->rank != 1 || (in[j]->f != NULL) != (in[0]->f != NULL))
            return onnx_fail(cx, err, SNUG_E_ARG, "a constant Concat is folded only over vectors of one type");
        len += in[j]->dims[0];
    }
    onnx_const *c = const_new(1, &len, in[0]->f != NULL);
    size_t at = 0;
    for (size_t j = 0; c && j < n_in; j++) {
        if (c->f) memcpy(c->f + at, in[j]->f, in[j]->numel * sizeof *c->f);
        else memcpy(c->i + at, in[j]->i, in[j]->numel * sizeof *c->i);
        at += in[j]->numel;
    }
    return set_output(cx, n, c, err);
}

static snug_status fold_cast(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_const *x, snug_error *err) {
    const Onnx__AttributeProto *to = onnx_attr(n, "to");
    if (!to || (to->i != DT_FLOAT && to->i != DT_INT64 && to->i != DT_INT32 && to->i != DT_BOOL))
        return onnx_fail(cx, err, SNUG_E_ARG, "a constant Cast folds to float, int32, int64 or bool only");
    onnx_const *c = const_new(x->rank, x->dims, to->i == DT_FLOAT);
    for (size_t j = 0; c && j < x->numel; j++) {
        if (c->f) c->f[j] = x->f ? x->f[j] : (float)x->i[j];
        else c->i[j] = x->i ? x->i[j] : (int64_t)x->f[j];
        if (to->i == DT_BOOL && c->i) c->i[j] = c->i[j] != 0; /* a causal mask's flags */
    }
    return set_output(cx, n, c, err);
}

snug_status onnx_fold(onnx_ctx *cx, const Onnx__NodeProto *n, bool *done, snug_error *err) {
    *done = false;
    const char *op = n->op_type;
    if (strcmp(op, "Constant") == 0) return *done = true, fold_constant(cx, n, err);
    onnx_value *in[8] = {NULL};
    onnx_const *c[8] = {NULL};
    if (n->n_input == 0 || n->n_input > 8) return SNUG_OK;
    for (size_t j = 0; j < n->n_input; j++) {
        in[j] = n->input[j] && *n->input[j] ? onnx_find(cx, n->input[j]) : NULL;
        c[j] = in[j] ? in[j]->c : NULL;
    }
    if (strcmp(op, "Shape") == 0 && in[0]) return *done = true, fold_shape(cx, n, in[0], err);
    bool missing = false;
    for (size_t j = 0; j < n->n_input; j++) {
        if (n->input[j] && *n->input[j] && !c[j]) return SNUG_OK; /* reads a tensor: an op to map */
        missing |= !c[j] && !(j == 1 && strcmp(op, "Squeeze") == 0); /* Squeeze's axes are optional */
    }
    *done = true;
    if (missing) return onnx_fail(cx, err, SNUG_E_ARG, "an input of this constant %s is missing", op);
    if (strcmp(op, "Gather") == 0 && n->n_input == 2) return fold_gather(cx, n, c[0], c[1], err);
    if (strcmp(op, "Unsqueeze") == 0 && n->n_input == 2) return fold_squeeze(cx, n, c[0], c[1], true, err);
    if (strcmp(op, "Squeeze") == 0) return fold_squeeze(cx, n, c[0], n->n_input > 1 ? c[1] : NULL, false, err);
    if (strcmp(op, "Concat") == 0) return fold_concat(cx, n, c, n->n_input, err);
    if (strcmp(op, "Cast") == 0) return fold_cast(cx, n, c[0], err);
    if (strcmp(op, "Identity") == 0) return set_output(cx, n, const_copy(c[0], c[0]->rank, c[0]->dims), err);
    bool taken = false; /* Slice, Not, Transpose of a weight, shape arithmetic: onnx_ops_sequence.c */
    const snug_status s = onnx_fold_sequence(cx, n, &taken, err);
    if (taken) return s;
    return onnx_fail(cx, err, SNUG_E_ARG, "%s on constants is not folded (snug folds Constant, Shape, Gather, "
                     "Unsqueeze, Squeeze, Concat, Cast, Identity, Slice, Not and integer arithmetic): export with "
                     "do_constant_folding=True, which folds it in the exporter, and with "
                     "training=torch.onnx.TrainingMode.TRAINING, which keeps BatchNorm a layer", op);
}

/* for the pattern files (onnx_ops_sequence.c) */
onnx_const *onnx_const_new(int rank, const int64_t *dims, bool is_float) { return const_new(rank, dims, is_float); }

snug_status onnx_set_const(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_const *c, snug_error *err) {
    return set_output(cx, n, c, err);
}
