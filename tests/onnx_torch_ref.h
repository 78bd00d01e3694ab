/* Shared by the tests that hold snug to PyTorch on an exported model (test_onnx_torch, test_onnx_unet): the
 * reference a CTest fixture wrote into $SNUG_ONNX_TORCH_DIR (scripts/export_onnx.py: STEM.json, its index, and
 * STEM.f64, per tensor each case's float64 values) and the comparison of one optimizer step with it.
 *
 * A case ("one_pass", "micro_batches") holds PyTorch's float64 loss and, per state_dict name, the gradient of a
 * parameter or the value of a running statistic after the forwards; CASE_float32 the same from PyTorch's
 * float32. snug may deviate from float64, per tensor in relative L2 norm, by at most TORCH_REF_YARDSTICK times
 * PyTorch float32's own deviation on that tensor plus TORCH_REF_FLOOR: two float32 engines round differently,
 * so either may be the closer, while a wrong term (a missed gradient path, a stale buffer) is far outside. The
 * loss is one number whose float32 deviation may cancel, so its yardstick also takes that of a bias gradient
 * the caller names (the last layer's: the softmax probabilities the loss is a function of). */
#ifndef SNUG_TESTS_ONNX_TORCH_REF_H
#define SNUG_TESTS_ONNX_TORCH_REF_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "snug.h"

#define TORCH_REF_YARDSTICK 4.0
#define TORCH_REF_FLOOR 1e-5

typedef struct torch_ref {
    char *text;      /* STEM.json */
    cJSON *index;
    double *values;  /* STEM.f64 */
} torch_ref;

/* $SNUG_ONNX_TORCH_DIR/name into buf (fails the test when the variable is unset: run through ctest). */
const char *torch_ref_path(const char *name, char *buf, size_t len);
/* Reads STEM.json and STEM.f64 from the fixture's folder; fails the test when missing. */
void torch_ref_load(torch_ref *r, const char *stem);
void torch_ref_free(torch_ref *r);
/* The micro-batch the reference ran a case with. */
size_t torch_ref_micro_batch(const torch_ref *r, const char *onnx_case);
/* Asserts snug's loss and every parameter's gradient (a buffer's value) of trainer tr, just after
 * snug_trainer_gradients, against the case; prints the worst tensors. */
void torch_ref_check(const torch_ref *r, snug_trainer *tr, double loss, const char *onnx_case,
                     const char *loss_yardstick_tensor);

/* The next state of the references' 64-bit LCG (Knuth's MMIX constants; resnet18_reference.py's lcg_states). */
uint64_t torch_ref_lcg(uint64_t *state);
/* One step of the export FILE (in the fixture's folder) on the first `batch` samples of ds, planned at the case's
 * micro-batch without checkpoints, held to the case by torch_ref_check. */
void torch_ref_check_step(const torch_ref *r, const char *file, const snug_dataset *ds, size_t batch,
                          const char *onnx_case, const char *loss_yardstick_tensor);
/* torch_ref_check_step of the reference STEM on its batch of `images` labelled images (c, side, side) of 10
 * classes, whose values the references' LCG draws from the batch's seed (resnet18_reference.py's lcg_inputs). */
void torch_ref_check_image_case(const char *stem, const char *file, size_t images, size_t c, size_t side,
                                const char *onnx_case, const char *loss_yardstick_tensor);

/* The same for a token model (a twin of scripts/token_reference.py): the reference STEM's batch of `sequences` x
 * `context` tokens, each the LCG's state >> shift, then per token its target, of `vocab` classes. */
void torch_ref_check_token_step(const char *stem, const char *file, size_t sequences, size_t context, size_t vocab,
                                int shift, const char *onnx_case, const char *loss_yardstick_tensor);

#endif
