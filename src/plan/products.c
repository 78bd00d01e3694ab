/* What multiplies a plan's linear layers (snug_products): the request's choice, resolved against the plan's
 * number format and this CPU into one product (op_product) that the plan records and its op calls carry. A
 * table, so that a choice reads as one row. */
#include <string.h>

#include "core/error.h"
#include "kernels/isa.h"
#include "kernels/sgemm.h"
#include "plan/plan.h"

static const struct {
    snug_products products;
    const char *name;
} choices[] = {
    {SNUG_PRODUCTS_AUTO, "auto"},
    {SNUG_PRODUCTS_BLAS, "blas"},
    {SNUG_PRODUCTS_SNUG, "snug"},
};
#define NCHOICES (sizeof choices / sizeof choices[0])

snug_status snug_parse_products(const char *text, snug_products *out, snug_error *err) {
    *out = SNUG_PRODUCTS_AUTO;
    for (size_t i = 0; text && i < NCHOICES; i++)
        if (strcmp(text, choices[i].name) == 0) return *out = choices[i].products, SNUG_OK;
    return snug_fail(err, SNUG_E_ARG, "'%s' is not a product snug knows: use auto (snug's own where this CPU runs "
                     "them fast, the default), blas (the BLAS) or snug (snug's own wherever it has one)",
                     text ? text : "");
}

const char *snug_products_name(snug_products p) {
    for (size_t i = 0; i < NCHOICES; i++)
        if (choices[i].products == p) return choices[i].name;
    return "auto";
}

/* bgemm runs on every CPU (its portable kernel where AVX512_BF16 is missing) but pays only where vdpbf16ps
 * does twice an FMA's work in an FMA's time (kernel_bf16_products_pay); sgemm needs AVX-512. */
plan_compute plan_compute_of(snug_precision precision, snug_products products) {
    const bool bf16 = precision == SNUG_PRECISION_BF16;
    plan_compute how = {.bf16 = bf16, .product = OP_PRODUCT_BLAS};
    if (products == SNUG_PRODUCTS_BLAS) return how;
    if (bf16 && (products == SNUG_PRODUCTS_SNUG || kernel_bf16_products_pay())) how.product = OP_PRODUCT_BGEMM;
    else if (sgemm_enabled()) how.product = OP_PRODUCT_SGEMM;
    return how;
}

void plan_variant_compute(plan_variant *v, plan_compute how) {
    v->bf16 = how.bf16;
    v->product = how.product;
}

const char *plan_product_name(op_product product) {
    return product == OP_PRODUCT_BGEMM ? "snug bf16" : product == OP_PRODUCT_SGEMM ? "snug fp32" : "blas";
}
