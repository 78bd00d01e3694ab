/* The kept bfloat16 copies of a bf16 plan's linear weights, written by the optimizer's update. Those products
 * read each weight rounded to bfloat16, kept once per window (op_desc.kept_bf16_weight); rounding it after the
 * step would read the float32 weights again and write the copy, a pass over the model's size inside the first
 * forward. The update has each new value in L1 already, so it writes the copy too (optim_span.copy16), and the
 * copy is marked current. Only the update writes both together: every other way a parameter can change
 * (loading weights or a state, the initialisation, the ranks' broadcast) clears the mark, and the next window
 * then derives everything again, as it would without the fusion. A pointer snug_trainer_param hands out stays
 * valid for the trainer's life and the caller may write through it after any later step (Python keeps it as a
 * memoryview), so once one is handed out the mark is never set again: such a trainer rounds its copies at
 * every window, as before. */
#include <stdlib.h>

#include "kernels/bgemm.h"
#include "train/trainer.h"

struct trainer_copies {
    int *nodes;   /* the nodes whose copy a span writes */
    int n;
    bool current; /* the copies hold the parameters as they are: the last change was the update */
    bool handed_out; /* snug_trainer_param gave the caller a pointer to the values: they may change any time */
};

/* The span of the trainable parameter at `offset` (numel elements), or NULL. */
static optim_span *span_at(snug_trainer *tr, size_t offset, size_t numel) {
    for (int i = 0; i < tr->opt.n_spans; i++)
        if (tr->spans[i].offset == offset && tr->spans[i].numel == numel) return &tr->spans[i];
    return NULL;
}

void trainer_bind_copies(snug_trainer *tr) {
    const snug_graph *g = tr->g;
    if (!tr->opt.spans || !(tr->copies = calloc(1, sizeof *tr->copies))) return; /* the first forward rounds */
    if (!(tr->copies->nodes = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof(int)))) return;
    for (int i = 0; i < g->n_nodes; i++) {
        uint16_t *w16 = exec_kept_bf16_weight(&tr->x, i);
        if (!w16) continue;
        const graph_param *p = &g->params[g->nodes[i].params[0]];
        optim_span *s = p->buffer ? NULL : span_at(tr, p->offset, p->numel);
        if (!s || s->copy16) continue; /* a second copy of one weight is rounded by its op */
        s->copy16 = w16;
        tr->copies->nodes[tr->copies->n++] = i;
    }
    if (tr->copies->n) tr->opt.round16 = bgemm_round_weights; /* the rounding the products' own would do */
}

void trainer_free_copies(snug_trainer *tr) {
    if (tr->copies) free(tr->copies->nodes);
    free(tr->copies);
    tr->copies = NULL;
}

void trainer_copies_written(snug_trainer *tr) {
    if (!tr->copies || !tr->copies->n) return;
    exec_weights_changed(&tr->x); /* what the ops derive otherwise (Winograd's weights) is stale */
    for (int i = 0; i < tr->copies->n; i++) exec_kept_bf16_weight_current(&tr->x, tr->copies->nodes[i]);
    tr->copies->current = !tr->copies->handed_out;
}

void trainer_copies_stale(const snug_trainer *tr) {
    if (tr->copies) tr->copies->current = false;
}

void trainer_copies_handed_out(const snug_trainer *tr) {
    if (tr->copies) tr->copies->current = false, tr->copies->handed_out = true;
}

bool trainer_copies_take_current(snug_trainer *tr) {
    const bool current = tr->copies && tr->copies->current;
    trainer_copies_stale(tr);
    return current;
}
