/* From the sections of a model file to builder calls: [model] makes the input, every other section one layer
 * through the public builder of its `type`. A table lists each type's keys (kind, default), so the parser, its
 * "unknown key" messages and docs/model-files.md all follow one list. Shape checks stay with the builders:
 * their messages come back prefixed with the file, the line and the layer. Keys and values from the file reach
 * messages escaped (core/escape.h). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decimal.h"
#include "core/error.h"
#include "core/escape.h"
#include "graph/graph.h"
#include "graph/model_file.h"

#define MODEL_INPUT "input" /* the name of the model input's node: what `input = input` reads */
#define MAX_KEYS 9
#define INIT_SCALE_KEY "init_scale"

typedef enum value_kind { V_SIZE, V_FLOAT, V_BOOL, V_LAYER } value_kind;

typedef union value {
    size_t z;
    float f;
    bool b;
    const char *s;
} value;

typedef struct key_spec {
    const char *name;
    value_kind kind;
    const char *def;        /* the default as text, or the name of an earlier key of the type whose value it
                               takes (maxpool2d's stride = kernel); NULL: the key is required */
} key_spec;

typedef snug_tensor (*build_fn)(snug_graph *g, const char *name, const snug_tensor *in, const value *v);

typedef struct layer_type {
    const char *name;
    int n_inputs;           /* 1: `input` (default: the layer above); 2: `inputs = a, b` */
    build_fn build;
    key_spec keys[MAX_KEYS + 1];  /* terminated by a NULL name */
} layer_type;

/* ---- one build function per type: the values in the order of the type's keys ---------------------------- */

static snug_tensor b_linear(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_linear(g, n, in[0], v[0].z);
}
static snug_tensor b_conv2d(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    const bool square = v[6].z == v[1].z && v[7].z == v[2].z && v[8].z == v[3].z;
    if (v[4].z == 1 && v[5].z == 1 && square) return snug_conv2d(g, n, in[0], v[0].z, v[1].z, v[2].z, v[3].z);
    if (v[5].z == 0 || (!square && v[7].z == 0)) { /* the spec would read 0 as 1 or as stride: refused */
        snug_fail(&g->err, SNUG_E_ARG, "conv2d '%s': %s 0: write 1 or more (dilation 1: none)", n,
                  v[5].z == 0 ? "dilation" : "stride_w");
        return -1;
    }
    const snug_conv2d_spec s = {.out_channels = v[0].z, .kernel = v[1].z, .stride = v[2].z, .padding = v[3].z,
                                .dilation = v[5].z, .groups = v[4].z, .kernel_w = square ? 0 : v[6].z,
                                .stride_w = square ? 0 : v[7].z, .padding_w = square ? 0 : v[8].z};
    return snug_conv2d_ex(g, n, in[0], &s);
}
static snug_tensor b_conv_transpose2d(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_conv_transpose2d(g, n, in[0], v[0].z, v[1].z, v[2].z, v[3].z);
}
static snug_tensor b_relu(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_relu(g, n, in[0]);
}
static snug_tensor b_gelu(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_gelu(g, n, in[0]);
}
static snug_tensor b_sigmoid(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_sigmoid(g, n, in[0]);
}
static snug_tensor b_tanh(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_tanh(g, n, in[0]);
}
static snug_tensor b_scale_shift(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_scale_shift(g, n, in[0], v[0].f, v[1].f);
}
static snug_tensor b_maxpool2d(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_maxpool2d_padded(g, n, in[0], v[0].z, v[1].z, v[2].z);
}
static snug_tensor b_upsample_nearest2d(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_upsample_nearest2d(g, n, in[0], v[0].z);
}
static snug_tensor b_global_avgpool(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_global_avgpool(g, n, in[0]);
}
static snug_tensor b_flatten(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_flatten(g, n, in[0]);
}
static snug_tensor b_dropout(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_dropout(g, n, in[0], v[0].f);
}
static snug_tensor b_add(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_add(g, n, in[0], in[1]);
}
static snug_tensor b_sub(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_binary(g, n, SNUG_BINARY_SUB, in[0], in[1]);
}
static snug_tensor b_mul(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_binary(g, n, SNUG_BINARY_MUL, in[0], in[1]);
}
static snug_tensor b_div(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_binary(g, n, SNUG_BINARY_DIV, in[0], in[1]);
}
static snug_tensor b_concat(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_concat(g, n, in[0], in[1]);
}
static snug_tensor b_batchnorm2d(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_batchnorm2d(g, n, in[0], v[0].f, v[1].f);
}
static snug_tensor b_groupnorm(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_groupnorm(g, n, in[0], v[0].z, v[1].f);
}
static snug_tensor b_layernorm(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_layernorm(g, n, in[0], v[0].f);
}
static snug_tensor b_embedding(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_embedding(g, n, in[0], v[0].z, v[1].z);
}
static snug_tensor b_position_embedding(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_position_embedding(g, n, in[0], v[0].z);
}
static snug_tensor b_linear_tied(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_linear_tied(g, n, in[0], v[0].s);
}
static snug_tensor b_self_attention(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    return snug_self_attention(g, n, in[0], v[0].z, v[1].b);
}
static snug_tensor b_softmax_cross_entropy(snug_graph *g, const char *n, const snug_tensor *in, const value *v) {
    (void)v;
    return snug_softmax_cross_entropy(g, n, in[0]);
}

/* The order here is the order of docs/model-files.md. maxpool2d's stride defaults to its kernel (PyTorch's
 * default); a stride written as 0 reaches the builder, which refuses it. */
static const layer_type types[] = {
    {"linear", 1, b_linear, {{"out", V_SIZE, NULL}}},
    {"conv2d", 1, b_conv2d, {{"out_channels", V_SIZE, NULL}, {"kernel", V_SIZE, NULL}, {"stride", V_SIZE, "1"},
                             {"padding", V_SIZE, "0"}, {"groups", V_SIZE, "1"},
                             {"dilation", V_SIZE, "1"}, {"kernel_w", V_SIZE, "kernel"},
                             {"stride_w", V_SIZE, "stride"}, {"padding_w", V_SIZE, "padding"}}},
    {"conv_transpose2d", 1, b_conv_transpose2d,
     {{"out_channels", V_SIZE, NULL}, {"kernel", V_SIZE, NULL}, {"stride", V_SIZE, "1"}, {"padding", V_SIZE, "0"}}},
    {"relu", 1, b_relu, {{0}}},
    {"gelu", 1, b_gelu, {{0}}},
    {"sigmoid", 1, b_sigmoid, {{0}}},
    {"tanh", 1, b_tanh, {{0}}},
    {"scale_shift", 1, b_scale_shift, {{"scale", V_FLOAT, "1"}, {"shift", V_FLOAT, "0"}}},
    {"maxpool2d", 1, b_maxpool2d, {{"kernel", V_SIZE, NULL}, {"stride", V_SIZE, "kernel"}, {"padding", V_SIZE, "0"}}},
    {"upsample_nearest2d", 1, b_upsample_nearest2d, {{"scale", V_SIZE, "2"}}},
    {"global_avgpool", 1, b_global_avgpool, {{0}}},
    {"flatten", 1, b_flatten, {{0}}},
    {"dropout", 1, b_dropout, {{"p", V_FLOAT, "0.5"}}},
    {"add", 2, b_add, {{0}}},
    {"mul", 2, b_mul, {{0}}},
    {"sub", 2, b_sub, {{0}}},
    {"div", 2, b_div, {{0}}},
    {"concat", 2, b_concat, {{0}}},
    {"batchnorm2d", 1, b_batchnorm2d, {{"eps", V_FLOAT, "1e-5"}, {"momentum", V_FLOAT, "0.1"}}},
    {"groupnorm", 1, b_groupnorm, {{"groups", V_SIZE, NULL}, {"eps", V_FLOAT, "1e-5"}}},
    {"layernorm", 1, b_layernorm, {{"eps", V_FLOAT, "1e-5"}}},
    {"embedding", 1, b_embedding, {{"vocab", V_SIZE, NULL}, {"dim", V_SIZE, NULL}}},
    {"position_embedding", 1, b_position_embedding, {{"max_len", V_SIZE, NULL}}},
    {"linear_tied", 1, b_linear_tied, {{"embedding", V_LAYER, NULL}}},
    {"self_attention", 1, b_self_attention, {{"heads", V_SIZE, NULL}, {"causal", V_BOOL, "false"}}},
    {"softmax_cross_entropy", 1, b_softmax_cross_entropy, {{0}}},
};
#define NTYPES (sizeof types / sizeof types[0])

static const char *const type_names[NTYPES + 1] = {
    "linear", "conv2d", "conv_transpose2d", "relu", "gelu", "sigmoid", "tanh", "scale_shift", "maxpool2d", "upsample_nearest2d", "global_avgpool",
    "flatten", "dropout", "add", "mul", "sub", "div", "concat", "batchnorm2d", "groupnorm", "layernorm", "embedding", "position_embedding",
    "linear_tied", "self_attention", "softmax_cross_entropy", NULL};

const char *const *mf_layer_types(void) { return type_names; }

static const layer_type *find_type(const char *name) {
    for (size_t i = 0; i < NTYPES; i++)
        if (strcmp(types[i].name, name) == 0) return &types[i];
    return NULL;
}

/* ---- values ------------------------------------------------------------------------------------------------ */

static const char *kind_hint(value_kind k) {
    switch (k) {
    case V_SIZE: return "a whole number >= 0, e.g. 32";
    case V_FLOAT: return "a finite decimal number, e.g. 0.1 or 1e-5";
    case V_BOOL: return "true or false";
    case V_LAYER: return "the name of a layer above";
    }
    return "?";
}

static bool parse_size(const char *s, size_t *out) {
    if (!isdigit((unsigned char)s[0])) return false; /* strtoull takes blanks, signs and wraps "-1" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > SIZE_MAX) return false;
    *out = (size_t)v;
    return true;
}

/* A float as written: NULL, or why it is not one (the end of a message "KEY = 'VALUE' ..."). A value a float
 * cannot hold is refused as written, rather than reported as the 0 or infinity it would round to. */
static const char *parse_float(const char *s, float *out) {
    const size_t len = decimal_length(s);
    if (len == 0 || s[len] != '\0') return "is not a finite decimal number, e.g. 0.1 or 1e-5";
    const double v = strtod(s, NULL);
    if (!(fabs(v) <= FLT_MAX)) return "is too large for a float (at most about 3.4e38)";
    if (decimal_nonzero(s, len) && (float)v == 0.0f)
        return "underflows a float (to 0): the smallest positive float is about 1.4e-45";
    *out = (float)v;
    return NULL;
}

static const char *parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0) return *out = true, NULL;
        if (strcmp(s, no[i]) == 0) return *out = false, NULL;
    }
    return "is not true or false";
}

/* NULL, or why s is not a value of kind k (the end of a message "KEY = 'VALUE' ..."). */
static const char *parse_value(value_kind k, const char *s, value *out) {
    switch (k) {
    case V_SIZE: return parse_size(s, &out->z) ? NULL : "is not a whole number >= 0, e.g. 32";
    case V_FLOAT: return parse_float(s, &out->f);
    case V_BOOL: return parse_bool(s, &out->b);
    case V_LAYER: out->s = s; return *s ? NULL : "is not the name of a layer above";
    }
    return "is not a value";
}

/* ---- building ------------------------------------------------------------------------------------------------ */

typedef struct builder {
    mf_doc *doc;
    snug_graph *g;
    snug_tensor last;       /* the output of the layer above: a layer's default input */
    int loss_section;       /* the section of the loss, once built; -1 before */
    snug_error *err;
} builder;

/* "type, input, out_channels, kernel, ...": the keys a type takes, for messages. */
static void list_keys(const layer_type *t, char *buf, size_t len) {
    int n = snprintf(buf, len, "type, %s", t->n_inputs == 2 ? "inputs" : "input");
    for (int i = 0; t->keys[i].name && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, ", %s", t->keys[i].name);
}

static void list_types(char *buf, size_t len) {
    int n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NTYPES && n >= 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%s", i ? ", " : "", types[i].name);
}

/* A key the section has but nothing took: the first one, by line. */
static const mf_entry *first_unused(const mf_section *s) {
    const mf_entry *first = NULL;
    for (int i = 0; i < s->n_entries; i++)
        if (!s->entries[i].used && (!first || s->entries[i].line < first->line)) first = &s->entries[i];
    return first;
}

/* The tensor a layer named `ref` (or the model input) gives, for layer s reading it through key e. A ref that
 * names a section is a valid layer name; one that names nothing is printed escaped. */
static bool resolve(builder *b, const mf_section *s, const mf_entry *e, const char *ref, snug_tensor *out) {
    const int node = graph_find_node(b->g, ref);
    if (node >= 0) return *out = b->g->nodes[node].output, true;
    if (strcmp(ref, s->name) == 0)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, "%s = %s: the layer reads its own output "
                       "(a cycle): name a layer above it", e->key, ref), false;
    int later = mf_section_index(b->doc, ref);
    if (later >= 0)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, "%s = %s: cycle or forward reference: "
                       "'%s' is defined later (line %d); a layer reads only layers above it, so move it up or "
                       "read another layer", e->key, ref, ref, b->doc->sections[later].line), false;
    const escaped shown = escape_text(ref);
    return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, "%s = %s: there is no layer '%s' (name a "
                   "layer above this one, or '" MODEL_INPUT "' for the model input)", e->key, shown.text,
                   shown.text), false;
}

/* `inputs = a, b`: exactly two names. */
static bool resolve_pair(builder *b, const mf_section *s, const mf_entry *e, snug_tensor in[2]) {
    const char *comma = strchr(e->value, ',');
    char names[2][SNUG_NAME_MAX] = {"", ""};
    if (comma && !strchr(comma + 1, ',')) {
        size_t n0 = (size_t)(comma - e->value);
        snprintf(names[0], sizeof names[0], "%.*s", (int)(n0 < SNUG_NAME_MAX - 1 ? n0 : SNUG_NAME_MAX - 1),
                 e->value);
        snprintf(names[1], sizeof names[1], "%s", comma + 1);
        for (int k = 0; k < 2; k++) { /* trim */
            char *p = names[k];
            size_t n = strlen(p);
            while (n && isspace((unsigned char)p[n - 1])) p[--n] = '\0';
            size_t lead = strspn(p, " \t");
            memmove(p, p + lead, n - lead + 1);
        }
    }
    if (!names[0][0] || !names[1][0])
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, "inputs = %s: give two layer names "
                       "separated by a comma, e.g. inputs = conv1, relu2", escape_text(e->value).text), false;
    return resolve(b, s, e, names[0], &in[0]) && resolve(b, s, e, names[1], &in[1]);
}

/* The layer's input tensors, from its `input` entry (default: the layer above) or its `inputs` entry. */
static bool layer_inputs(builder *b, const mf_section *s, const layer_type *t, const mf_entry *e, snug_tensor in[2]) {
    if (t->n_inputs == 2) {
        if (!e)
            return mf_fail(b->err, SNUG_E_FORMAT, b->doc, s->line, s->name, "type %s needs 'inputs = A, B' (the "
                           "two layers it combines)", t->name), false;
        return resolve_pair(b, s, e, in);
    }
    if (!e) return in[0] = b->last, true;
    return resolve(b, s, e, e->value, &in[0]);
}

/* The index of the key called name among the first n keys of t, or -1. */
static int key_index(const layer_type *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(t->keys[i].name, name) == 0) return i;
    return -1;
}

/* The values of the type's keys (given[i] from the section, or the defaults: a value, or an earlier key's). */
static bool layer_values(builder *b, const mf_section *s, const layer_type *t, const mf_entry *const *given,
                         value *v) {
    for (int i = 0; t->keys[i].name; i++) {
        const key_spec *k = &t->keys[i];
        const mf_entry *e = given[i];
        if (!e && !k->def)
            return mf_fail(b->err, SNUG_E_FORMAT, b->doc, s->line, s->name, "type %s needs '%s' (add %s = %s)",
                           t->name, k->name, k->name, kind_hint(k->kind)), false;
        if (!e) {
            const int same = key_index(t, i, k->def);
            if (same >= 0) v[i] = v[same];
            else parse_value(k->kind, k->def, &v[i]); /* the defaults are valid */
            continue;
        }
        const char *why = parse_value(k->kind, e->value, &v[i]);
        if (why)
            return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, "%s = '%s' %s", k->name,
                           escape_text(e->value).text, why), false;
        snug_tensor unused;
        if (k->kind == V_LAYER && !resolve(b, s, e, e->value, &unused)) return false;
    }
    return true;
}

/* Takes the entries the type knows; a key left over is unknown. Unknown keys are refused before missing ones,
 * since a misspelt key also shows up as a missing one. */
static bool take_keys(builder *b, mf_section *s, const layer_type *t, const mf_entry **in, const mf_entry **given,
                      const mf_entry **scale) {
    *in = mf_take(s, t->n_inputs == 2 ? "inputs" : "input");
    *scale = mf_take(s, INIT_SCALE_KEY);
    for (int i = 0; t->keys[i].name; i++) given[i] = mf_take(s, t->keys[i].name);
    const mf_entry *extra = first_unused(s);
    if (!extra) return true;
    char keys[256];
    list_keys(t, keys, sizeof keys);
    return mf_fail(b->err, SNUG_E_FORMAT, b->doc, extra->line, s->name, "unknown key '%s' for type %s (it takes: "
                   "%s; and any layer with a weight: " INIT_SCALE_KEY ")", escape_text(extra->key).text, t->name,
                   keys), false;
}

/* `init_scale = X`, a key of every layer with a weight: scales its initial values (snug_init_scale). */
static bool apply_init_scale(builder *b, const mf_section *s, const mf_entry *e) {
    if (!e) return true;
    value v;
    const char *why = parse_value(V_FLOAT, e->value, &v);
    if (why)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, INIT_SCALE_KEY " = '%s' %s",
                       escape_text(e->value).text, why), false;
    if (v.f < 0.0f)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, INIT_SCALE_KEY " = '%s' is not a finite "
                       "number >= 0 (0 starts the weight at zero, 1 keeps the default)", escape_text(e->value).text),
               false;
    snug_init_scale(b->g, s->name, v.f);
    snug_error ge;
    if (snug_graph_check(b->g, &ge) != SNUG_OK)
        return mf_fail(b->err, ge.status, b->doc, e->line, s->name, "%s", ge.message), false;
    return true;
}

/* A builder's message starts "<kind> '<name>': "; the file's prefix names the layer already. */
static const char *strip_layer_prefix(const char *msg, const char *name) {
    char tag[SNUG_NAME_MAX + 8];
    snprintf(tag, sizeof tag, "'%s': ", name);
    const char *p = strstr(msg, tag);
    bool prefix = p && p > msg && p - msg < 40 && !memchr(msg, ' ', (size_t)(p - msg) - 1);
    return prefix ? p + strlen(tag) : msg;
}

static bool build_layer(builder *b, int index) {
    mf_section *s = &b->doc->sections[index];
    char list[512];
    if (strcmp(s->name, MODEL_INPUT) == 0)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, s->line, s->name, "'" MODEL_INPUT "' names the model "
                       "input: give the layer another name"), false;
    if (b->loss_section >= 0)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, s->line, s->name, "comes after the loss '%s' (line %d): "
                       "the loss must be the last layer", b->doc->sections[b->loss_section].name,
                       b->doc->sections[b->loss_section].line), false;
    const mf_entry *te = mf_take(s, "type");
    list_types(list, sizeof list);
    if (!te)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, s->line, s->name, "no 'type' (add type = one of: %s)",
                       list), false;
    const layer_type *t = find_type(te->value);
    if (!t)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, te->line, s->name, "unknown layer type '%s' (choose from: "
                       "%s)", escape_text(te->value).text, list), false;
    const mf_entry *in_entry, *given[MAX_KEYS], *scale;
    snug_tensor in[2];
    value v[MAX_KEYS];
    if (!take_keys(b, s, t, &in_entry, given, &scale) || !layer_inputs(b, s, t, in_entry, in) ||
        !layer_values(b, s, t, given, v))
        return false;
    snug_tensor out = t->build(b->g, s->name, in, v);
    if (out < 0) {
        snug_error e;
        snug_graph_check(b->g, &e);
        return mf_fail(b->err, e.status, b->doc, s->line, s->name, "%s", strip_layer_prefix(e.message, s->name)),
               false;
    }
    if (!apply_init_scale(b, s, scale)) return false;
    if (b->g->loss_node >= 0) b->loss_section = index;
    b->last = out;
    return true;
}

/* ---- [model] --------------------------------------------------------------------------------------------- */

/* `input = image C H W` or `input = tokens T`. */
static bool model_input(builder *b, const mf_section *s, const mf_entry *e) {
    char kind[16], extra[2];
    unsigned long long d[3];
    int n = sscanf(e->value, "%15s %llu %llu %llu %1s", kind, &d[0], &d[1], &d[2], extra);
    bool neg = strchr(e->value, '-') != NULL; /* %llu would take "-1" */
    if (!neg && strcmp(kind, "image") == 0 && n == 4 && d[0] <= SIZE_MAX && d[1] <= SIZE_MAX && d[2] <= SIZE_MAX)
        snug_input(b->g, MODEL_INPUT, (size_t)d[0], (size_t)d[1], (size_t)d[2]);
    else if (!neg && n == 2 && strcmp(kind, "tokens") == 0 && d[0] <= SIZE_MAX)
        snug_input_tokens(b->g, MODEL_INPUT, (size_t)d[0]);
    else
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, "input = %s: write 'input = image C H W' "
                       "(channels, height, width) or 'input = tokens T' (a sequence of T token ids)",
                       escape_text(e->value).text), false;
    snug_error ge;
    if (snug_graph_check(b->g, &ge) != SNUG_OK)
        return mf_fail(b->err, ge.status, b->doc, e->line, s->name, "%s", ge.message), false;
    b->last = b->g->nodes[b->g->n_nodes - 1].output;
    return true;
}

/* The graph's name: `name`, else the file name without its folder and ".ini". A name from the file must be
 * printable ASCII: every message and report about the model prints it. */
static bool model_name(builder *b, const mf_section *s, const mf_entry *e, char *buf, size_t len) {
    if (e) {
        for (const unsigned char *c = (const unsigned char *)e->value; *c; c++)
            if (*c < 0x20 || *c > 0x7e)
                return mf_fail(b->err, SNUG_E_FORMAT, b->doc, e->line, s->name, "name = '%s': a model name is "
                               "printable ASCII text (letters, digits, punctuation, spaces)",
                               escape_text(e->value).text), false;
        snprintf(buf, len, "%s", e->value);
        return true;
    }
    const char *base = strrchr(b->doc->file, '/');
    base = base ? base + 1 : b->doc->file;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".ini") == 0) n -= 4;
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), base);
    return true;
}

/* The first section: [model], with `input` and an optional `name`. Creates the graph. */
static bool build_model(builder *b) {
    if (b->doc->n_sections == 0 || strcmp(b->doc->sections[0].name, "model") != 0) {
        int line = b->doc->n_sections ? b->doc->sections[0].line : 1;
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, line, NULL, "the first section must be [model] (with "
                       "input = image C H W or input = tokens T): put it at the top"), false;
    }
    mf_section *s = &b->doc->sections[0];
    const mf_entry *name = mf_take(s, "name"), *input = mf_take(s, "input"), *extra = first_unused(s);
    if (extra)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, extra->line, s->name, "unknown key '%s' (it takes: name, "
                       "input)", escape_text(extra->key).text), false;
    if (!input)
        return mf_fail(b->err, SNUG_E_FORMAT, b->doc, s->line, s->name, "no 'input' (add input = image C H W, or "
                       "input = tokens T)"), false;
    char gname[SNUG_NAME_MAX];
    if (!model_name(b, s, name, gname, sizeof gname)) return false;
    b->g = snug_graph_new(gname);
    if (!b->g) return snug_fail(b->err, SNUG_E_OOM, "%s: out of memory while building the graph", b->doc->file),
                      false;
    return model_input(b, s, input);
}

snug_graph *mf_build(mf_doc *d, snug_error *err) {
    builder b = {.doc = d, .loss_section = -1, .err = err};
    bool ok = build_model(&b);
    for (int i = 1; ok && i < d->n_sections; i++) ok = build_layer(&b, i);
    const int unread = ok && b.loss_section >= 0 ? graph_unread_node(b.g) : -1;
    if (unread >= 0) {
        ok = false;
        const int at = mf_section_index(d, b.g->nodes[unread].name), sec = at >= 0 ? at : 0; /* 0: [model] */
        mf_fail(err, SNUG_E_FORMAT, d, d->sections[sec].line, d->sections[sec].name, "its output is never read: no "
                "later layer takes it (a layer reads the one above it unless it says input = NAME); read it "
                "from a later layer or remove it");
    }
    if (ok && b.loss_section < 0) {
        const mf_section *last = &d->sections[d->n_sections - 1];
        ok = false;
        mf_fail(err, SNUG_E_FORMAT, d, d->n_sections > 1 ? last->line : d->last_line,
                d->n_sections > 1 ? last->name : NULL, "the model has no loss: end the layer list with a layer "
                "of type softmax_cross_entropy");
    }
    if (ok) return b.g;
    snug_graph_free(b.g);
    return NULL;
}
