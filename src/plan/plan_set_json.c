/* snug_plan_set_json: a plan set as one JSON document (the candidates, the chosen plan with its baseline and,
 * when asked, its buffers). Byte counts are JSON numbers (exact up to 2^53 bytes, 8 PiB). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "snug.h"

/* cJSON's adders return NULL when out of memory; one flag collects every failure so the document is either
 * whole or not printed at all. */
typedef struct json_doc {
    bool failed;
} json_doc;

static cJSON *check(json_doc *d, cJSON *item) {
    if (!item) d->failed = true;
    return item;
}

static void add_number(json_doc *d, cJSON *obj, const char *name, double v) {
    check(d, cJSON_AddNumberToObject(obj, name, v));
}

static void add_string(json_doc *d, cJSON *obj, const char *name, const char *s) {
    check(d, s ? cJSON_AddStringToObject(obj, name, s) : cJSON_AddNullToObject(obj, name));
}

static void add_bytes(json_doc *d, cJSON *obj, const size_t bytes[SNUG_MEM_NCATEGORIES]) {
    cJSON *b = check(d, cJSON_AddObjectToObject(obj, "bytes"));
    if (!b) return;
    for (int i = 0; i < SNUG_MEM_NCATEGORIES; i++)
        add_number(d, b, snug_mem_category_name((snug_mem_category)i), (double)bytes[i]);
}

/* What a plan summary says, and the length of its schedule (the rows of the CSV timeline). */
static void add_summary(json_doc *d, cJSON *obj, const snug_plan *p, const snug_plan_summary *s) {
    char policy[32];
    add_string(d, obj, "resolved_checkpoint", snug_format_checkpoint(s->policy, policy, sizeof policy));
    check(d, cJSON_AddBoolToObject(obj, "selective", s->selective));
    add_number(d, obj, "segments", (double)s->segments);
    add_number(d, obj, "spared_segments", (double)s->spared_segments);
    add_number(d, obj, "pending_bytes", (double)s->pending_bytes);
    add_number(d, obj, "kept_bytes", (double)s->kept_bytes);
    add_number(d, obj, "regenerated_inputs", (double)s->regenerated_inputs);
    add_number(d, obj, "regenerated_bytes", (double)s->regenerated_bytes);
    add_bytes(d, obj, s->bytes);
    add_number(d, obj, "total", (double)s->total);
    add_number(d, obj, "activation_arena", (double)s->activation_peak);
    add_number(d, obj, "live_peak", (double)s->live_peak);
    add_number(d, obj, "peak", (double)s->peak);
    add_number(d, obj, "peak_step", (double)s->peak_step);
    add_string(d, obj, "peak_op", s->peak_op);
    add_string(d, obj, "peak_phase", snug_phase_name(s->peak_phase));
    add_number(d, obj, "step_flops", s->step_flops);
    add_number(d, obj, "recompute_flops", s->recompute_flops);
    add_number(d, obj, "recompute_percent", s->step_flops > 0 ? 100.0 * s->recompute_flops / s->step_flops : 0.0);
    add_number(d, obj, "schedule_steps", (double)snug_plan_step_count(p));
    add_string(d, obj, "linear_product", s->products);
}

static cJSON *row_object(json_doc *d, const snug_plan *p, bool chosen) {
    cJSON *o = check(d, cJSON_CreateObject());
    if (!o) return NULL;
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    char policy[32];
    add_number(d, o, "micro_batch", (double)s.micro_batch);
    add_number(d, o, "micro_batches", (double)s.micro_batches);
    add_string(d, o, "checkpoint", snug_format_checkpoint(s.requested, policy, sizeof policy));
    add_summary(d, o, p, &s);
    check(d, s.budget ? cJSON_AddBoolToObject(o, "fits", s.total <= s.budget) : cJSON_AddNullToObject(o, "fits"));
    check(d, cJSON_AddBoolToObject(o, "chosen", chosen));
    return o;
}

static cJSON *buffer_object(json_doc *d, const snug_plan_buffer_info *b) {
    cJSON *o = check(d, cJSON_CreateObject());
    if (!o) return NULL;
    add_string(d, o, "layer", b->layer);
    add_string(d, o, "what", b->what);
    add_string(d, o, "dtype", b->dtype);
    add_string(d, o, "category", snug_mem_category_name(b->category));
    add_number(d, o, "bytes", (double)b->bytes);
    add_number(d, o, "offset", (double)b->offset);
    add_number(d, o, "first_step", (double)b->first_step);
    add_number(d, o, "last_step", (double)b->last_step);
    check(d, cJSON_AddBoolToObject(o, "in_place", b->in_place));
    return o;
}

static void add_to_array(json_doc *d, cJSON *array, cJSON *item) {
    if (!item) return;
    if (!array || !cJSON_AddItemToArray(array, item)) {
        cJSON_Delete(item);
        d->failed = true;
    }
}

static void add_buffers(json_doc *d, cJSON *obj, const snug_plan *p) {
    cJSON *a = check(d, cJSON_AddArrayToObject(obj, "buffers"));
    for (size_t i = 0; a && i < snug_plan_buffer_count(p); i++) {
        snug_plan_buffer_info b;
        snug_plan_buffer(p, i, &b);
        add_to_array(d, a, buffer_object(d, &b));
    }
}

/* This machine's memory and whether the plan can be reserved on it (snug_plan_check_machine's message if not). */
static void add_machine(json_doc *d, cJSON *o, const snug_plan *p) {
    snug_machine_memory m;
    snug_error err = {0};
    snug_machine_memory_get(&m);
    const bool fits = snug_plan_check_machine(p, &m, &err) == SNUG_OK;
    cJSON *obj = check(d, cJSON_AddObjectToObject(o, "machine"));
    if (!obj) return;
    add_number(d, obj, "physical_bytes", (double)m.physical);
    check(d, m.cgroup ? cJSON_AddNumberToObject(obj, "cgroup_bytes", (double)m.cgroup)
                      : cJSON_AddNullToObject(obj, "cgroup_bytes"));
    check(d, cJSON_AddBoolToObject(obj, "fits", fits));
    add_string(d, obj, "message", fits ? NULL : err.message);
}

static void add_chosen(json_doc *d, cJSON *root, const snug_plan_set *set, bool layers) {
    const snug_plan *c = snug_plan_set_at(set, snug_plan_set_chosen(set));
    cJSON *o = row_object(d, c, true);
    if (!o) return;
    if (!cJSON_AddItemToObject(root, "chosen", o)) {
        cJSON_Delete(o);
        d->failed = true;
        return;
    }
    snug_plan_summary s, b;
    snug_plan_summarize(c, &s);
    snug_plan_summarize(snug_plan_set_baseline(set), &b);
    add_string(d, o, "chosen_by", s.micro_batch_chosen ? "budget" : "flags");
    /* Data parallelism adds no buffer: the all-reduce works in place on the gradient block. */
    cJSON *comm = check(d, cJSON_AddObjectToObject(o, "communication"));
    if (comm) {
        add_number(d, comm, "extra_bytes", 0);
        add_number(d, comm, "allreduce_bytes_per_step", (double)s.bytes[SNUG_MEM_GRADS]);
        add_string(d, comm, "note", "all-reduce in place on the gradients: no extra buffer; the plan is per rank");
    }
    cJSON *base = check(d, cJSON_AddObjectToObject(o, "baseline"));
    if (base) add_summary(d, base, snug_plan_set_baseline(set), &b);
    add_machine(d, o, c);
    if (layers) add_buffers(d, o, c);
}

static cJSON *build(json_doc *d, const snug_plan_set *set, const char *title, bool layers) {
    cJSON *root = check(d, cJSON_CreateObject());
    if (!root) return NULL;
    const snug_plan_request *c = snug_plan_request_of(snug_plan_set_at(set, 0));
    add_string(d, root, "model", title);
    add_number(d, root, "batch", (double)c->batch);
    check(d, c->budget ? cJSON_AddNumberToObject(root, "budget", (double)c->budget)
                       : cJSON_AddNullToObject(root, "budget"));
    add_string(d, root, "optimizer", c->optim.kind == SNUG_OPTIM_ADAMW ? "adamw" : "sgd");
    if (c->optim.kind == SNUG_OPTIM_SGD) add_number(d, root, "momentum", c->optim.momentum);
    add_number(d, root, "threads", c->threads);
    add_string(d, root, "precision", snug_precision_name(c->precision));
    add_string(d, root, "products", snug_products_name(c->products));
    cJSON *rows = check(d, cJSON_AddArrayToObject(root, "candidates"));
    for (size_t i = 0; rows && i < snug_plan_set_count(set); i++)
        add_to_array(d, rows, row_object(d, snug_plan_set_at(set, i), i == snug_plan_set_chosen(set)));
    add_chosen(d, root, set, layers);
    return root;
}

char *snug_plan_set_json(const snug_plan_set *set, const char *title, bool buffers) {
    json_doc d = {false};
    cJSON *root = build(&d, set, title, buffers);
    char *cj = root && !d.failed ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!cj) return NULL;
    char *text = strdup(cj); /* the caller frees with free(), whatever cJSON's allocator */
    cJSON_free(cj);
    return text;
}
