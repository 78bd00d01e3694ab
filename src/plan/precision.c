/* The names of the number formats a plan can run in (snug_precision). */
#include <string.h>

#include "core/error.h"
#include "snug.h"

snug_status snug_parse_precision(const char *text, snug_precision *out, snug_error *err) {
    *out = SNUG_PRECISION_FP32;
    if (text && (strcmp(text, "fp32") == 0 || strcmp(text, "float32") == 0)) return SNUG_OK;
    if (text && (strcmp(text, "bf16") == 0 || strcmp(text, "bfloat16") == 0))
        return *out = SNUG_PRECISION_BF16, SNUG_OK;
    return snug_fail(err, SNUG_E_ARG, "bad precision '%s': use fp32 (float32 throughout) or bf16 (bfloat16 "
                     "activations and products, float32 parameters and sums)", text ? text : "");
}

const char *snug_precision_name(snug_precision p) { return p == SNUG_PRECISION_BF16 ? "bf16" : "fp32"; }
