/* An op's sizes in a plan: where its kernels depend on the plan's matrix product (op_desc.by_product: linear's),
 * the hooks for that product; else the hooks of the plan's number format. Every size the planner asks of an op
 * comes through here, so that the workspace a plan reserves is the one its product runs in. */
#include "ops/op.h"
#include "plan/plan.h"

size_t plan_op_workspace(const graph_node *n, const plan_variant *v, size_t m, int threads) {
    const op_desc *op = n->op;
    if (op->by_product)
        return op->by_product->workspace_bytes ? op->by_product->workspace_bytes(n, m, threads, v->product) : 0;
    size_t (*bytes)(const op_node *, size_t, int) =
        v->bf16 && op->bf16_workspace_bytes ? op->bf16_workspace_bytes : op->workspace_bytes;
    return bytes ? bytes(n, m, threads) : 0;
}

size_t plan_op_pending(const graph_node *n, const plan_variant *v, size_t m) {
    const op_desc *op = n->op;
    if (op->by_product) return op->by_product->pending_bytes ? op->by_product->pending_bytes(n, m, v->product) : 0;
    size_t (*bytes)(const op_node *, size_t) = v->bf16 && op->bf16_pending_bytes ? op->bf16_pending_bytes
                                                                                   : op->pending_bytes;
    return bytes ? bytes(n, m) : 0;
}

size_t plan_op_kept(const graph_node *n, const plan_variant *v, size_t m) {
    const op_desc *op = n->op;
    if (op->by_product) return op->by_product->kept_bytes ? op->by_product->kept_bytes(n, m, v->product) : 0;
    return op->kept_bytes ? op->kept_bytes(n, m) : 0;
}

bool plan_op_has_stage(const graph_node *n) {
    const op_desc *op = n->op;
    return op->by_product ? op->by_product->regen_stage_bytes != NULL : op->regen_stage_bytes != NULL;
}

size_t plan_op_stage(const graph_node *n, const plan_variant *v, size_t m, int threads) {
    const op_desc *op = n->op;
    if (!plan_op_has_stage(n)) return 0;
    return op->by_product ? op->by_product->regen_stage_bytes(n, m, threads, v->product)
                          : op->regen_stage_bytes(n, m, threads);
}

bool plan_op_reads_packed_unstaged(const graph_node *n, const plan_variant *v) {
    const op_product_sizes *sizes = n->op->by_product;
    return v->bf16 && sizes && sizes->reads_packed && sizes->reads_packed(n, v->product);
}

bool plan_input_staged(const graph_node *n, const plan *p, int i) {
    return plan_op_has_stage(n) &&
           (p->regen[i] || (p->packed_in[i] && !plan_op_reads_packed_unstaged(n, &p->variant)));
}

size_t plan_op_input_stage(const graph_node *n, const plan_variant *v, size_t m, int threads, bool regenerated) {
    const op_desc *op = n->op;
    if (!regenerated && v->bf16 && !op->by_product && op->bf16_packed_stage_bytes && plan_op_has_stage(n))
        return op->bf16_packed_stage_bytes(n, m, threads);
    return plan_op_stage(n, v, m, threads);
}
