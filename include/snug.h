/*
 * snug.h — the whole public API of snug, a training engine for the batch you want in the memory you have.
 *
 * The flow of one run:
 *   1. a graph: build one (snug_graph_new, snug_input, snug_conv2d, ...), read a model file (snug_model_load) or
 *      take a built-in model (snug_model_builtin); shapes are per sample, the batch dimension is the plan's;
 *   2. a data set: MNIST, text, images and masks, arrays in memory, or your own through callbacks
 *      (snug_dataset_from_source);
 *   3. a plan (snug_plan_new): what one optimizer step needs, every byte by category, for a plan request (batch,
 *      micro-batch or "choose it", checkpoint policy or "choose it", budget, optimizer); a request that does not
 *      fit says by how much and what would;
 *   4. a trainer (snug_trainer_new) for that plan: it reserves every byte before the first step, and a step
 *      allocates nothing; then optimizer steps (snug_trainer_fit, or snug_trainer_step one global batch at a
 *      time), evaluation (snug_trainer_evaluate) and the memory report (snug_trainer_memory).
 *
 * One convention: a function that can fail returns a snug_status and, given a non-NULL snug_error, fills it with
 * one message that says what failed, where, and what to do; what it makes comes back through an out-parameter.
 * The graph builders are the exception that keeps model code short: they return a tensor handle and record the
 * first error in the graph (sticky, so a chain of builder calls needs one check at the end: snug_graph_check).
 *
 * Threads: the library uses OpenMP (and the BLAS shares its runtime); snug_set_threads sets the count.
 */
#ifndef SNUG_H
#define SNUG_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SNUG_VERSION "0.1.0"

/* ---------------------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------------------- */
typedef enum snug_status {
    SNUG_OK = 0,
    SNUG_E_ARG,       /* a bad argument: zero or negative size, micro-batch larger than batch, unknown name */
    SNUG_E_SHAPE,     /* shapes that do not fit together */
    SNUG_E_OOM,       /* the plan does not fit the memory budget, or the system refused memory */
    SNUG_E_IO,        /* a file could not be opened, read or written */
    SNUG_E_FORMAT,    /* a file is malformed: wrong magic, truncated, inconsistent dimensions */
    SNUG_E_NONFINITE, /* the loss or the gradients stayed NaN or infinite */
    SNUG_E_OVERFLOW,  /* a size computation overflowed size_t */
    SNUG_E_INTERRUPTED, /* the run stopped on request (snug_train_config.stop) before its end; its state is
                           written when it has a state folder */
} snug_status;

typedef struct snug_error {
    snug_status status;
    char message[1024];
} snug_error;

/* A short name for a status ("out of memory", "bad format", ...). */
const char *snug_status_name(snug_status s);

/* ---------------------------------------------------------------------------------------------------------
 * Memory: every byte the engine holds belongs to one category.
 * ------------------------------------------------------------------------------------------------------- */
typedef enum snug_mem_category {
    SNUG_MEM_PARAMS = 0,   /* weights and biases */
    SNUG_MEM_GRADS,        /* their gradients, accumulated over a window of micro-batches */
    SNUG_MEM_OPTIM,        /* optimizer state: SGD momentum 1x params, AdamW 2x */
    SNUG_MEM_ACTIVATIONS,  /* what forward keeps for backward, and the gradients flowing back */
    SNUG_MEM_WORKSPACE,    /* scratch of a single op (im2col columns, per-thread partial sums) */
    SNUG_MEM_DATA,         /* the input and target buffers of one micro-batch, and what the data sets hold */
    SNUG_MEM_NCATEGORIES
} snug_mem_category;

const char *snug_mem_category_name(snug_mem_category c);

typedef struct snug_mem_report {
    size_t budget;                          /* 0: unlimited */
    size_t in_use[SNUG_MEM_NCATEGORIES];    /* bytes per category */
    size_t total;                           /* sum of in_use */
    size_t peak;                            /* the largest total ever held */
} snug_mem_report;

/* Parses "256MiB", "1.5GiB", "64M", "1000000" (bytes) into bytes: a decimal number and a unit. KiB/MiB/GiB/TiB
 * and K/M/G/T are powers of 1024; kB/MB/GB/TB are powers of 1000; no unit (or B) counts bytes, and then the number
 * must be whole ("1.5" is refused, not read as 1 byte). Rejects zero, negatives, hexadecimal, garbage and
 * overflow. */
snug_status snug_parse_size(const char *text, size_t *bytes, snug_error *err);
/* Writes "44.00 MiB" style text. Returns buf. */
char *snug_format_bytes(size_t bytes, char *buf, size_t len);
/* The same rounded up in the last digit: a budget to advise, which snug_parse_size reads back as at least bytes
 * ("9.30 MiB" for 9.2905 MiB, where snug_format_bytes says "9.29 MiB"). */
char *snug_format_bytes_up(size_t bytes, char *buf, size_t len);
/* Parses a duration into seconds: a decimal number and a unit, s, m or h ("90s", "10m", "1.5h"), or a number of
 * seconds without one. 0 is a duration; negatives, hexadecimal, inf, nan and more than 1e7 seconds are not. */
snug_status snug_parse_duration(const char *text, double *seconds, snug_error *err);
/* Writes a count rounded to a whole number with thousands separators: "1,234,567"; a fraction below 10 (a slow
 * rate) with two significant digits: "0.31". Returns buf. */
char *snug_format_count(double value, char *buf, size_t len);
/* Writes a duration as "0:45", "12:03" or "1:02:03" (rounded to the second). Returns buf. */
char *snug_format_duration(double seconds, char *buf, size_t len);
/* Writes a FLOP count with a decimal prefix: "25.1 MFLOP", "912 FLOP". Returns buf. */
char *snug_format_flops(double flops, char *buf, size_t len);

/* ---------------------------------------------------------------------------------------------------------
 * Tensors and graphs: a static graph whose activation shapes are per sample; the batch dimension is implicit.
 * Tensors are small integer handles into their graph; a negative handle means an earlier error.
 * ------------------------------------------------------------------------------------------------------- */
typedef struct snug_graph snug_graph;
typedef int snug_tensor;

#define SNUG_MAX_DIMS 4

typedef struct snug_shape {
    int rank;                 /* number of per-sample dimensions */
    size_t dims[SNUG_MAX_DIMS];
} snug_shape;

/* A new, empty graph; NULL only when the system is out of memory (snug_graph_check(NULL) then says so). */
snug_graph *snug_graph_new(const char *name);
void snug_graph_free(snug_graph *g);
const char *snug_graph_name(const snug_graph *g);
/* The first error recorded by a builder call, or SNUG_OK. Once the graph has its loss it is complete, and then a
 * layer other than the loss whose output no later layer reads is an error too (SNUG_E_ARG, naming the layer): it
 * would hold parameters and memory for nothing, and is almost always a layer wired to the wrong input. Planning
 * (snug_plan_new) checks the graph this way. */
snug_status snug_graph_check(const snug_graph *g, snug_error *err);
snug_shape snug_tensor_shape(const snug_graph *g, snug_tensor t);
/* The per-sample shape of the graph's input, and of the logits its loss reads ((classes), (T, classes) or
 * (classes, H, W)): what a sample is and what snug_trainer_predict gives per sample. Rank 0 before the input or
 * the loss is built. */
snug_shape snug_graph_input_shape(const snug_graph *g);
snug_shape snug_graph_output_shape(const snug_graph *g);
/* The parameters and non-trainable buffers (BatchNorm's running statistics) of the graph, in graph order: the
 * order of snug_trainer_param and of a saved file. Each has its name (PyTorch's state_dict name, "conv1.weight"),
 * its shape (PyTorch's layout) and whether the optimizer trains it; NULL past the end. */
size_t snug_graph_param_count(const snug_graph *g);
const char *snug_graph_param(const snug_graph *g, size_t i, snug_shape *shape, bool *trainable);

/* Every layer below has a name, unique in its graph, that names its parameters ("conv1.weight") and the
 * messages. Parameters start from PyTorch's default initialisation, drawn from the seed of the run. */

/* ---- Inputs: one per graph ---- */

/* An image-like input, (C, H, W) per sample; h = w = 1 for vectors. */
snug_tensor snug_input(snug_graph *g, const char *name, size_t c, size_t h, size_t w);
/* A sequence of `tokens` token ids per sample (stored as floats, exact below 2^24), shape (tokens): what a
 * language model reads (snug_text_open's samples). */
snug_tensor snug_input_tokens(snug_graph *g, const char *name, size_t tokens);

/* ---- Products: linear and convolution layers ---- */

/* torch.nn.Linear: x (in) -> (out_features), or (T, in) -> (T, out_features) applied to the last dimension. A
 * rank-3 input is refused with a hint to flatten it first. */
snug_tensor snug_linear(snug_graph *g, const char *name, snug_tensor x, size_t out_features);
/* snug_linear without the bias (torch.nn.Linear(..., bias=False)): y = x W^T, the one parameter "<name>.weight". */
snug_tensor snug_linear_no_bias(snug_graph *g, const char *name, snug_tensor x, size_t out_features);
/* The tied output head of a language model: logits = x W^T, no bias, with W (vocab, dim) the weight of the
 * embedding layer named `embedding_layer` (built earlier in g): x (T, dim) -> (T, vocab), or (dim) -> (vocab).
 * Declares no parameter: the embedding's gradient receives both layers' contributions. */
snug_tensor snug_linear_tied(snug_graph *g, const char *name, snug_tensor x, const char *embedding_layer);
/* torch.nn.Conv2d over x (C, H, W): square kernel, stride and zero padding. */
snug_tensor snug_conv2d(snug_graph *g, const char *name, snug_tensor x, size_t out_channels, size_t kernel,
                        size_t stride, size_t padding);
/* snug_conv2d with `groups` (PyTorch's Conv2d groups): input and output channels split into `groups` equal
 * groups, each output group sees only its input group; both channel counts must be divisible by groups. Weight
 * "<name>.weight" (out_channels, C/groups, kernel, kernel), bias (out_channels), initialised as PyTorch does
 * (fan_in = C/groups * kernel^2). groups = 1 is snug_conv2d; groups = C is a depthwise convolution. */
snug_tensor snug_conv2d_grouped(snug_graph *g, const char *name, snug_tensor x, size_t out_channels,
                                size_t kernel, size_t stride, size_t padding, size_t groups);
/* snug_conv2d_grouped without the bias (torch.nn.Conv2d(..., bias=False), the convolution before a BatchNorm):
 * the one parameter "<name>.weight". */
snug_tensor snug_conv2d_no_bias(snug_graph *g, const char *name, snug_tensor x, size_t out_channels, size_t kernel,
                                size_t stride, size_t padding, size_t groups);
/* Everything snug_conv2d_ex takes: torch.nn.Conv2d's arguments. kernel, stride and padding are the height
 * axis's, and the width's too unless kernel_w is set: then the width axis has kernel_w, stride_w (0 reads as
 * stride) and padding_w (torch.nn.Conv2d(kernel_size=(kernel, kernel_w), stride=(stride, stride_w),
 * padding=(padding, padding_w))). A zero dilation or groups reads as 1. */
typedef struct snug_conv2d_spec {
    size_t out_channels, kernel, stride, padding;
    size_t dilation; /* the kernel's taps this many pixels apart on both axes: a window spans dilation * (kernel -
                        1) + 1 pixels, and Ho = (H + 2 padding - span) / stride + 1 (Wo likewise, the width's) */
    size_t groups;
    bool no_bias;    /* no "<name>.bias" (torch.nn.Conv2d(..., bias=False)) */
    size_t kernel_w, stride_w, padding_w;
} snug_conv2d_spec;
/* torch.nn.Conv2d with all of its options: dilation (DeepLab's atrous convolutions: 3x3, dilation 2, padding 2
 * keeps the plane), a rectangular kernel, a stride and a padding per axis. Weight "<name>.weight" (out_channels,
 * C/groups, kernel, kernel_w), bias (out_channels), PyTorch's init with fan_in = C/groups * kernel * kernel_w;
 * dilation does not change fan_in. */
snug_tensor snug_conv2d_ex(snug_graph *g, const char *name, snug_tensor x, const snug_conv2d_spec *spec);
/* Transposed convolution of x (C, H, W), as torch.nn.ConvTranspose2d (no output padding): output (out_channels,
 * Ho, Wo) with Ho = (H - 1) * stride - 2 * padding + kernel (likewise Wo), which must be at least 1. Weight
 * "<name>.weight" (C, out_channels, kernel, kernel) in PyTorch's layout, bias (out_channels); PyTorch's init,
 * whose fan_in for a transposed convolution is out_channels * kernel^2. kernel 2, stride 2, padding 0 doubles
 * the plane (UNet's up-sampling). */
snug_tensor snug_conv_transpose2d(snug_graph *g, const char *name, snug_tensor x, size_t out_channels,
                                  size_t kernel, size_t stride, size_t padding);

/* ---- Activations and element-wise layers ---- */

/* max(x, 0). Right after snug_batchnorm2d, snug_groupnorm or snug_add, or right before a snug_maxpool2d whose
 * windows tile its input (kernel = stride, both sides multiples of it), and read by nothing else, it runs inside
 * that layer: the same results bit for bit, with less memory and traffic. */
snug_tensor snug_relu(snug_graph *g, const char *name, snug_tensor x);
/* GELU, the exact form x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (torch.nn.GELU() default, not the tanh
 * approximation), any shape. Its backward reads its input, which is therefore kept for backward. */
snug_tensor snug_gelu(snug_graph *g, const char *name, snug_tensor x);
/* The logistic sigmoid 1 / (1 + e^-x) (torch.nn.Sigmoid), any shape. Its backward reads its output, y (1 - y). */
snug_tensor snug_sigmoid(snug_graph *g, const char *name, snug_tensor x);
/* tanh(x) (torch.nn.Tanh), any shape. Its backward reads its output, 1 - y^2. */
snug_tensor snug_tanh(snug_graph *g, const char *name, snug_tensor x);
/* y = scale x + shift with two constant, finite scalars (nothing learned), any shape: `x * 0.5`, `x + 1`. */
snug_tensor snug_scale_shift(snug_graph *g, const char *name, snug_tensor x, float scale, float shift);
/* Element-wise sum of two tensors of the same shape: residual connections. */
snug_tensor snug_add(snug_graph *g, const char *name, snug_tensor a, snug_tensor b);
/* Element-wise arithmetic of two operands whose per-sample shapes broadcast by numpy's rule (aligned from the
 * last axis, each pair of sizes equal or one of them 1): x * s with x (C, H, W) and s (C, 1, 1) (squeeze-
 * excitation), x + p with x (T, D) and p (D), x * sigmoid(x) (SiLU). The output has the broadcast shape (at
 * most SNUG_MAX_DIMS axes per sample). Backward reduces each operand's gradient over the axes it was broadcast
 * along; mul and div read both operands in backward, so the plan keeps them (add and sub keep nothing). */
typedef enum snug_binary_op { SNUG_BINARY_ADD, SNUG_BINARY_SUB, SNUG_BINARY_MUL, SNUG_BINARY_DIV } snug_binary_op;
snug_tensor snug_binary(snug_graph *g, const char *name, snug_binary_op op, snug_tensor a, snug_tensor b);
/* The same with each operand read as a shape of its element count (NULL: its own shape): a global average
 * pool's (C) as (C, 1, 1), so that it broadcasts over an image's plane. SNUG_E_SHAPE when a view's element count
 * is not the tensor's, or the views do not broadcast. */
snug_tensor snug_binary_viewed(snug_graph *g, const char *name, snug_binary_op op, snug_tensor a,
                               const snug_shape *a_view, snug_tensor b, const snug_shape *b_view);
/* y = x op c (c_first: c op x) with c a constant of per-sample shape c_shape that broadcasts with x (read as
 * x_view, NULL: its own shape) and is the same for every sample: a per-channel normalisation (x - mean) / std
 * with mean and std of shape (C, 1, 1). The values (finite, and not 0 in x / c; SNUG_E_ARG otherwise) are
 * copied into the graph;
 * they are no parameter: nothing trains them, and snug_trainer_save does not write them. Only c / x keeps x for
 * backward; x op c for the other ops keeps nothing. */
snug_tensor snug_binary_const(snug_graph *g, const char *name, snug_binary_op op, snug_tensor x,
                              const snug_shape *x_view, const float *c, const snug_shape *c_shape, bool c_first);
/* Inverted dropout with drop probability p in [0, 1): in training each element is zeroed with probability p and
 * the others scaled by 1/(1-p). The mask is a function of (seed, optimizer step, layer, the element's place in
 * the global batch), so a recomputation replays it bit for bit, nothing is stored for backward, and how a batch
 * is split does not change it. The identity in evaluation. */
snug_tensor snug_dropout(snug_graph *g, const char *name, snug_tensor x, float p);

/* ---- Pooling and shapes ---- */

/* torch.nn.MaxPool2d(kernel, stride) over x (C, H, W), no padding. */
snug_tensor snug_maxpool2d(snug_graph *g, const char *name, snug_tensor x, size_t kernel, size_t stride);
/* torch.nn.MaxPool2d(kernel, stride, padding): the plane padded by `padding` on every side with -inf (a padded
 * position never wins), padding at most kernel / 2 as in PyTorch; (C, H, W) -> (C, Ho, Wo), Ho = (H + 2 padding -
 * kernel) / stride + 1. resnet18's stem pool is (3, 2, 1). padding 0 is snug_maxpool2d. */
snug_tensor snug_maxpool2d_padded(snug_graph *g, const char *name, snug_tensor x, size_t kernel, size_t stride,
                                  size_t padding);
/* Nearest up-sampling by a whole factor: (C, H, W) -> (C, scale H, scale W), every pixel repeated over a scale x
 * scale block, as torch.nn.Upsample(scale_factor=scale, mode="nearest"). No parameters; keeps nothing for
 * backward. 1 <= scale <= 64. */
snug_tensor snug_upsample_nearest2d(snug_graph *g, const char *name, snug_tensor x, size_t scale);
/* Global average pooling: (C, H, W) -> (C), the mean of each plane (torch.nn.AdaptiveAvgPool2d(1) + flatten). */
snug_tensor snug_global_avgpool(snug_graph *g, const char *name, snug_tensor x);
/* Any shape -> (numel): a view, no copy. */
snug_tensor snug_flatten(snug_graph *g, const char *name, snug_tensor x);
/* Concatenation along the first per-sample dimension (torch.cat(dim=1) on batched tensors): (C1, H, W) and
 * (C2, H, W) give (C1 + C2, H, W), a's channels first (UNet's skips); (C1) + (C2) and (T1, D) + (T2, D) too.
 * The ranks and every other dimension must match. */
snug_tensor snug_concat(snug_graph *g, const char *name, snug_tensor a, snug_tensor b);

/* ---- Normalisation ---- */

/* BatchNorm over the channels of x (C, H, W), as torch.nn.BatchNorm2d (PyTorch defaults: eps 1e-5, momentum
 * 0.1). Parameters "<name>.weight" (C, ones) and "<name>.bias" (C, zeros); non-trainable buffers
 * "<name>.running_mean" (C, zeros) and "<name>.running_var" (C, ones). Training normalises with the statistics
 * of the micro-batch over (m, H, W) and updates the running ones (running = (1 - momentum) * running +
 * momentum * batch, the unbiased variance), once per micro-batch; a recomputed forward (checkpointing) reuses
 * the statistics of the first and leaves the running ones alone. Evaluation normalises with the running ones.
 * NOTE: the statistics are those of each micro-batch, not of the global batch, so gradient accumulation with
 * BatchNorm is NOT exactly large-batch training (it is with GroupNorm and LayerNorm); keep micro-batches large
 * enough (>= 16 samples) for stable statistics. eps > 0, momentum in [0, 1]. */
snug_tensor snug_batchnorm2d(snug_graph *g, const char *name, snug_tensor x, float eps, float momentum);
/* GroupNorm of x (C, H, W) with `groups` groups of C/groups channels (C must be divisible by groups), as
 * torch.nn.GroupNorm: per sample, statistics over (C/groups, H, W); per-channel "<name>.weight" (ones) and
 * "<name>.bias" (zeros). Independent of the other samples, so accumulation stays exact. eps > 0 (PyTorch 1e-5). */
snug_tensor snug_groupnorm(snug_graph *g, const char *name, snug_tensor x, size_t groups, float eps);
/* LayerNorm over the last dimension of x (T, C) or (C), as torch.nn.LayerNorm(C): "<name>.weight" (C, ones),
 * "<name>.bias" (C, zeros). eps > 0 (PyTorch 1e-5). */
snug_tensor snug_layernorm(snug_graph *g, const char *name, snug_tensor x, float eps);

/* ---- Sequences: embeddings and attention ---- */

/* Token embedding (torch.nn.Embedding): tokens (T) holds token ids as floats (exact integers below 2^24; each is
 * rounded to the nearest integer), output (T, dim), the rows of "<name>.weight" (vocab, dim). An id outside
 * [0, vocab) gives a zero row and no gradient (the data layer reports such ids; the layer never reads out of
 * bounds). Init: GPT-2's N(0, 0.02) matched in standard deviation by a uniform U(-b, b), b = sqrt(3) * 0.02
 * (PyTorch's nn.Embedding default would be N(0, 1)). Token ids have no gradient. 1 <= vocab <= 2^24. */
snug_tensor snug_embedding(snug_graph *g, const char *name, snug_tensor tokens, size_t vocab, size_t dim);
/* Learned positions (GPT-2): x (T, D) + P[0..T) with "<name>.weight" P (max_len, D), initialised like
 * snug_embedding; T <= max_len. */
snug_tensor snug_position_embedding(snug_graph *g, const char *name, snug_tensor x, size_t max_len);
/* Multi-head scaled dot-product self-attention without projections (put linear layers around it). qkv is
 * (T, 3C): queries, keys and values concatenated along the last dimension, each (T, C); head h uses columns
 * [h*C/heads, (h+1)*C/heads) of each (C divisible by heads). Output (T, C), the heads side by side. Scores are
 * scaled by 1/sqrt(C/heads); causal: position t attends to positions 0..t only (a decoder, GPT). Keeps only its
 * input for backward: memory linear in T, not heads * T * T floats per sample. */
snug_tensor snug_self_attention(snug_graph *g, const char *name, snug_tensor qkv, size_t heads, bool causal);
/* snug_self_attention with causal = true. */
snug_tensor snug_causal_self_attention(snug_graph *g, const char *name, snug_tensor qkv, size_t heads);

/* ---- Layout, softmax and products between activations (attention written out by hand) ---- */

/* Axes count per sample: 0 is the first after the batch. None of these has parameters. */

/* x's axes in another order: output axis i is input axis perm[i] (torch.permute of the per-sample axes; perm
 * holds one entry per axis of x, each once). Keeps nothing for backward. */
snug_tensor snug_permute(snug_graph *g, const char *name, snug_tensor x, const int *perm);
/* len entries of axis `axis`, from start by step >= 1 (x[..., start:start + len * step:step, ...]); the last
 * must lie inside the axis. Backward adds into those entries only. Keeps nothing for backward. */
snug_tensor snug_slice(snug_graph *g, const char *name, snug_tensor x, int axis, size_t start, size_t len,
                       size_t step);
/* The same elements in row-major order under another shape of the same count: a view, no copy. */
snug_tensor snug_reshape(snug_graph *g, const char *name, snug_tensor x, snug_shape shape);
/* Softmax along one axis (torch.softmax(x, dim)); backward reads the kept output. Not for the logits: the loss
 * applies its own. */
snug_tensor snug_softmax(snug_graph *g, const char *name, snug_tensor x, int axis);
/* a (..., M, K) times b (..., K, N) -> (..., M, N) over the last two axes, the leading ones broadcast as numpy
 * (a missing or size-1 axis repeats): torch's a @ b of two activations. Keeps both inputs for backward. */
snug_tensor snug_matmul(snug_graph *g, const char *name, snug_tensor a, snug_tensor b);

/* ---- The loss: the last layer, exactly one per graph ---- */

/* Softmax cross-entropy over the classes of the logits, with the data set's targets:
 *   (classes)       one target per sample, loss output (1);
 *   (T, classes)    one target per token (a language model), loss output (T);
 *   (classes, H, W) one target per pixel, class first as in PyTorch's NCHW (segmentation), loss output (H, W).
 * Targets equal to SNUG_IGNORE_TARGET are ignored (no loss, no gradient, not counted): the loss of a window is
 * the sum over its counted items divided by the counted items of the whole global batch, and accuracy counts
 * every counted item. */
snug_tensor snug_softmax_cross_entropy(snug_graph *g, const char *name, snug_tensor logits);

/* ---- Initialisation ---- */

/* Scales the initial values of layer `layer`'s weight (its first own trainable parameter: a linear or conv
 * weight, an embedding table, a norm's gain) by `scale` >= 0; biases keep theirs. Two uses: 0 on the last norm
 * of a residual branch starts each block as the identity ("zero-init residual", Goyal et al. 2017), which lets
 * deep GroupNorm ResNets train from the first step; 1/sqrt(2 * layers) on a transformer's residual projections
 * (GPT-2). Sticky error (snug_graph_check) for an unknown layer, a layer without a weight, or a bad scale. */
void snug_init_scale(snug_graph *g, const char *layer, float scale);

/* ---- Model files and built-in models ---- */

/* Model files (docs/model-files.md): a network as an INI-like layer list. A [model] section gives the input
 * (`input = image C H W` or `input = tokens T`) and optionally a name; then one [NAME] section per layer in
 * execution order, with `type` (linear, conv2d, conv_transpose2d, relu, gelu, sigmoid, tanh, scale_shift,
 * maxpool2d, upsample_nearest2d, global_avgpool, flatten, dropout, add, sub, mul, div, concat, batchnorm2d, groupnorm,
 * layernorm, embedding, position_embedding, linear_tied, self_attention, softmax_cross_entropy) and that type's
 * keys, which are the builder arguments above. A layer reads the layer above unless it names another with `input = NAME` ("input" is the model input); add, sub, mul, div and concat take
 * `inputs = A, B`. The last layer is the loss. Every problem is reported as
 * "FILE:LINE: layer 'NAME': problem (what to do)": syntax errors, unknown types and keys (with the allowed ones),
 * missing keys, bad numbers (real values are decimal and must fit a float), inputs that name no layer above (a
 * cycle or a forward reference), duplicate names, shape mismatches and bad arguments (the builder's message), a
 * missing loss or layers after it, a layer whose output nothing reads. Text from the file is quoted with every
 * byte outside printable ASCII as \xNN.
 * snug_model_load reads the file at path (SNUG_E_IO when it cannot be opened); snug_model_parse reads a
 * NUL-terminated text and names it name_for_messages in messages. The graph is named by [model] `name`, else by
 * the file name without its folder and ".ini". */
snug_status snug_model_load(const char *path, snug_graph **out, snug_error *err);
snug_status snug_model_parse(const char *text, const char *name_for_messages, snug_graph **out, snug_error *err);

/* Built-in models: the model files of the project's models/ folder, compiled into the library (so a name needs
 * no install path). Trainable here: "mlp" (MNIST 1x28x28, 784-1024-1024-10), "cnn" (two conv3x3 + pool blocks,
 * two linear), "resmlp" (a deep chain for checkpointing: 784-256, then 32 residual blocks
 * x + dropout(fc2(relu(fc1(x))), 0.1) with a 1024-wide hidden layer, then 256-10; without normalisation its
 * residual stream grows with depth: train it with clipping or AdamW), "resnet20" (CIFAR ResNet-20 with
 * BatchNorm for 1x32x32 padded MNIST, 10 classes), "resnet20-gn" (the same with GroupNorm), "unet" (1x256x256, 2
 * classes per pixel) and "gpt" (bytes, context 256, 4 layers, d_model 256). For planning models larger than the
 * machine: "vgg16" (3x224x224, 1000 classes, 138M parameters), "resnet50" (3x224x224, 1000 classes) and
 * "unet-hires" (the unet for 1x1408x2112 inputs). A name that contains '/' or ends in ".ini" is read as a model
 * file instead (snug_model_load), one that ends in ".onnx" as an ONNX model (snug_graph_from_onnx). SNUG_E_ARG
 * for an unknown name, with the names there are. */
snug_status snug_model_builtin(const char *name, snug_graph **out, snug_error *err);
/* snug_model_builtin with another class count: the outputs of the layer the loss reads (a linear's `out`, a
 * conv2d's `out_channels`, a class per pixel) become `classes` instead of the file's number, so a zoo model
 * trains on 3 classes without copying its file; every other layer is the file's. 0: the file's own count.
 * SNUG_E_ARG when the loss reads a layer without such a number (gpt's tied head: its classes are the
 * vocabulary). */
snug_status snug_model_builtin_classes(const char *name, size_t classes, snug_graph **out, snug_error *err);
/* snug_model_parse with the class count set the same way (0: the text's own). */
snug_status snug_model_parse_classes(const char *text, const char *name_for_messages, size_t classes,
                                     snug_graph **out, snug_error *err);
/* The built-in model names, NULL-terminated. */
const char *const *snug_model_names(void);
/* Whether snug_model_builtin reads name as a model file: it contains '/' or ends in ".ini" or ".onnx". */
bool snug_model_is_file(const char *name);

/* An ONNX model (docs/onnx.md), as torch.onnx.export writes it (opsets 13 to 17, one file, float32), read into a
 * graph to plan and train. The one input, (N, F) or (N, C, H, W) with every dimension but the batch fixed,
 * becomes the graph's input; the one output feeds snug_softmax_cross_entropy (classes on the axis after the
 * batch). Constant computations (Constant, and the Shape -> Gather -> Unsqueeze -> Concat chains feeding a
 * Reshape) are folded at load. Ops map onto the builders above: Conv (square kernel, one stride, equal pads,
 * groups), Gemm and MatMul by a weight (with the bias Add after it), Add, Sub, Mul and Div (broadcasting, of
 * computed tensors and of Constant operands, which stay constants of the graph: an initializer operand is refused,
 * since it may be a learned parameter), Relu, BatchNormalization, MaxPool (no padding), GlobalAveragePool,
 * AveragePool over the whole plane, Flatten, Reshape to flatten or to add unit axes, Identity, Dropout.
 * A layer with weights is named after its weight's initializer without ".weight", and its parameters take the
 * initializers' names and start from their values, so saved weights (snug_trainer_save) carry the exporting
 * module's state_dict names; a Conv or MatMul without bias gets a bias that starts at zero, named
 * "<layer>.bias". Anything else is refused (SNUG_E_ARG) naming the node, its op and opset and what to do;
 * SNUG_E_IO when the file cannot be read, SNUG_E_FORMAT when it is not an ONNX model or is damaged. */
snug_status snug_graph_from_onnx(const char *path, snug_graph **out, snug_error *err);

/* ---------------------------------------------------------------------------------------------------------
 * Data sets: labelled samples of one per-sample shape, read on demand into a micro-batch buffer.
 * ------------------------------------------------------------------------------------------------------- */
typedef struct snug_dataset snug_dataset;

/* A target that counts for nothing: no loss, no gradient, not an item of the loss normaliser or of accuracy. */
#define SNUG_IGNORE_TARGET (-1)

/* Your own data, read through callbacks: snug asks for the samples of each micro-batch as it runs, so the data
 * can live anywhere (files, a database, a generator). Both callbacks may be called from any thread, but never
 * at the same time; `indices` are sample numbers in [0, size). Each writes n samples (inputs: sample numel floats
 * each, in sample_shape's order; targets: targets_per_sample each, a class in [0, classes) or
 * SNUG_IGNORE_TARGET) and returns true, or returns false after filling err with what went wrong: the step
 * (or evaluation) that asked then stops with that error. */
typedef struct snug_dataset_source {
    size_t size;                /* samples */
    snug_shape sample_shape;    /* (C, H, W) images, (T) token ids, ... */
    size_t targets_per_sample;  /* 1 (a label), or one per token or pixel */
    size_t classes;
    bool (*read_inputs)(void *user, const size_t *indices, size_t n, float *inputs, snug_error *err);
    bool (*read_targets)(void *user, const size_t *indices, size_t n, int32_t *targets, snug_error *err);
    void (*close)(void *user);  /* called once by snug_dataset_free; may be NULL */
    void *user;
} snug_dataset_source;

/* A data set over src (copied; src->user stays the caller's until close). SNUG_E_ARG for a zero size, shape,
 * class count or targets per sample, or a missing callback. */
snug_status snug_dataset_from_source(const snug_dataset_source *src, snug_dataset **out, snug_error *err);
/* Opens the MNIST IDX files in dir: train-images-idx3-ubyte and train-labels-idx1-ubyte (train = true) or the
 * t10k-* pair. The images are read as needed (pread, never mapped), the labels once. Every header, dimension and file size is checked; a bad file
 * is reported by name with the problem. Pixels are normalised as (x/255 - 0.1307) / 0.3081. */
snug_status snug_mnist_open(const char *dir, bool train, snug_dataset **out, snug_error *err);
/* Opens one image file and one label file given by path. */
snug_status snug_mnist_open_files(const char *images_path, const char *labels_path, snug_dataset **out,
                                  snug_error *err);
/* A dataset over caller-owned arrays (copied; snug_dataset_borrow_memory does not copy): inputs (n, c, h, w) as
 * floats, one class label per sample. */
snug_status snug_dataset_from_memory(const float *inputs, const int32_t *labels, size_t n, size_t c, size_t h,
                                     size_t w, size_t classes, snug_dataset **out, snug_error *err);
/* The general form: inputs (n, sample_shape) floats (any shape: (C, H, W) images, (T) token ids), targets
 * (n, targets_per_sample) class indices in [0, classes) or SNUG_IGNORE_TARGET: one per sample for classification,
 * one per token (T) or pixel (H * W) for sequence and segmentation models. Both arrays are copied. */
snug_status snug_dataset_from_arrays(const float *inputs, snug_shape sample_shape, const int32_t *targets,
                                     size_t targets_per_sample, size_t n, size_t classes, snug_dataset **out,
                                     snug_error *err);
/* The same without copying: the data set reads the caller's arrays where they are, so a data set as large as
 * memory holds once is not held twice. Lifetime rules: both arrays must stay allocated, at the same address,
 * until snug_dataset_free (and every trainer or evaluation reading the data set is done with it); the caller may
 * change values in between (a step reads what is there when it reads its micro-batch), but every target must
 * stay in [0, classes) or be SNUG_IGNORE_TARGET: the targets are checked here, once. The arrays are the
 * caller's memory: snug_dataset_memory counts none of it, and neither does snug_plan_request_whole_process. */
snug_status snug_dataset_borrow_arrays(const float *inputs, snug_shape sample_shape, const int32_t *targets,
                                       size_t targets_per_sample, size_t n, size_t classes, snug_dataset **out,
                                       snug_error *err);
/* snug_dataset_from_memory's form of it: inputs (n, c, h, w), one label per sample, borrowed. */
snug_status snug_dataset_borrow_memory(const float *inputs, const int32_t *labels, size_t n, size_t c, size_t h,
                                       size_t w, size_t classes, snug_dataset **out, snug_error *err);
/* MNIST centred in a larger frame: pad pixels on each side (pad 2 gives the 1x32x32 of ResNet-20), filled with
 * the normalised value of a 0 pixel (the background). */
snug_status snug_mnist_open_padded(const char *dir, bool train, size_t pad, snug_dataset **out, snug_error *err);
/* Wraps an image dataset (samples (C, H, W)) so that every image is centred in a frame of pad_h rows above and
 * below and pad_w columns left and right, filled with value. Per-sample labels pass through; per-pixel targets
 * (one per pixel) are padded with -1 (ignored). Takes ownership of inner: it is freed with the result, or at
 * once when this fails. */
snug_status snug_dataset_pad(snug_dataset *inner, size_t pad_h, size_t pad_w, float value, snug_dataset **out,
                             snug_error *err);

/* Byte-level text for language models (vocabulary 256: a token is a byte), the file at path read window by
 * window (pread, never mapped).
 * The first 1 - holdout of the bytes are the training part, the last holdout the held-out part (heldout_part
 * selects it; holdout in [0, 1), e.g. 0.1). Sample i of a part is the window starting at its byte i * context:
 * inputs are bytes [s, s + context) as floats (token ids, exact), targets bytes [s + 1, s + context + 1), so
 * context targets per sample and 256 classes. Windows do not cross parts; the last window of a part is padded
 * (inputs 0, targets -1, ignored), so every byte after the first of a part is predicted once per epoch. The
 * sample shape is (context), for snug_input_tokens. Fails for a missing or empty file, context 0, or a part
 * shorter than one window (context + 1 bytes). */
snug_status snug_text_open(const char *path, size_t context, double holdout, bool heldout_part,
                           snug_dataset **out, snug_error *err);

/* Synthetic segmentation, n samples of (1, height, width): random filled circles, rotated rectangles and
 * triangles (1 to 6) on a noisy background ramp, each shape brighter or darker than its surroundings; 2 classes
 * per pixel (1 inside a shape, 0 outside), height * width targets per sample. Sample i is a pure function of
 * (seed, i), drawn on every fill: nothing is stored, any resolution works. */
snug_status snug_shapes_new(size_t n, size_t height, size_t width, uint64_t seed, snug_dataset **out,
                            snug_error *err);

/* Segmentation from PNG files: dir/images/NAME.png and dir/masks/NAME.png (same names), samples in byte order of
 * the names. Images: grayscale (1 channel) or colour (3; palette expanded, alpha dropped, 16 bits scaled to 8),
 * all of one size and channel count, normalised as v / 127.5 - 1. Masks: 8-bit grayscale or palette PNGs of their
 * image's size, a class index per pixel, 255 = ignore (-1); classes = the largest index + 1 (at least 2). Every
 * file is decoded once here (one at a time), so a missing, corrupt or mismatched file is reported now, by name;
 * samples are decoded again on demand, nothing is kept in memory. A file's size is checked from its header before
 * it is decoded: one of another size than the first image, or of more than 256 MiB of decoded pixels, is refused
 * (SNUG_E_FORMAT) without decoding it. */
snug_status snug_segmentation_open(const char *dir, snug_dataset **out, snug_error *err);

/* A table of numbers in a CSV file: a header row of column names (unique, non-empty; quoted as RFC 4180 allows),
 * then one sample per row, comma-separated, every row with the header's number of cells (spaces around a cell
 * ignored; "\r\n" line ends, a UTF-8 byte-order mark and blank lines at the end of the file accepted). Every
 * column but the label column is a feature, read with strtod: a sample is the row's F features as (F, 1, 1),
 * for a model whose input is `image F 1 1`, in the header's order. The label column holds one class per row,
 * either all class numbers (whole numbers >= 0: classes = the largest + 1) or all names (text that is not a
 * number: classes = the distinct names, numbered in strcmp order; snug_dataset_class_name gives them); at most
 * 65536 classes. The whole table is read here, once, into memory (float32 features and int32 labels, counted by
 * snug_dataset_memory); a table of more than 1 GiB of features is refused. SNUG_E_FORMAT, naming the file, the
 * line (the header is line 1) and the column (number and name) where one applies, for: a missing value (an empty
 * cell, NA, N/A, NaN or ?), a cell that is not a number, a value that is not finite in float32, a row with too
 * few or too many cells, an empty or duplicate column name, no column of the label's name, a numeric label that
 * is negative or not whole, numbers and names mixed in the label column, a line longer than 1 MiB, a blank line
 * before more rows, and no data rows; SNUG_E_IO when the file cannot be opened or read. */
/* What a CSV training table's features were standardised with (snug_csv_open with standardise), kept with the
 * weights trained on it so that another table is read later as training read its own. Every array borrowed from
 * the data set, or owned by a snug_weights_data. */
typedef struct snug_table_stats {
    size_t columns;          /* the header's names, the label column's among them; 0: none */
    char **names;
    size_t label;            /* the label column's index */
    size_t classes;          /* the table's class count */
    double *mean, *std;      /* (columns - 1) per feature column, in the header's order */
} snug_table_stats;
/* Whether ds (or the data set a view of ds reads) is a CSV table standardised with its own or another table's
 * statistics: true and *out filled (borrowed from ds), else false. */
bool snug_dataset_table_stats(const snug_dataset *ds, snug_table_stats *out);
struct snug_weights_data;

typedef struct snug_csv_options {
    const char *label;       /* the label column's header name; NULL: the last column */
    bool standardise;        /* each feature column to zero mean, unit variance (mean and std of `stats_from`,
                                or of this file when NULL): (x - mean) / std, over the rows in double, the std
                                with divisor n, 1 for a constant column */
    const snug_dataset *stats_from; /* a CSV data set whose column statistics to use (the training table for
                                its validation table); NULL: this file's. This file must then have its columns
                                (names, order, label column), its labels are its classes (a class number beyond
                                them or a name it does not have is refused, naming the line) and the data set has
                                its class count and names. It may be freed once this one is open */
    const struct snug_weights_data *trained; /* without stats_from: the training table as saved with weights
                                (snug_weights_data_read; ignored when it holds no table), taken as stats_from
                                is: its columns, statistics, class count and class names */
} snug_csv_options;
/* Opens the table at path (o NULL: the defaults above, all zero). SNUG_E_ARG when stats_from is not a data set
 * of snug_csv_open. */
snug_status snug_csv_open(const char *path, const snug_csv_options *o, snug_dataset **out, snug_error *err);
/* Labelled images in one folder per class (the ImageFolder layout): dir/CLASS/NAME.png, .jpg or .jpeg (any case);
 * classes are the folder names in byte order (strcmp), samples class by class and within a class in byte order
 * of the file names, the target of a sample its class index. Hidden entries (names starting with '.') and other
 * files are ignored. PNG (as snug_segmentation_open reads it) and JPEG (gray or YCbCr/RGB; CMYK refused) files
 * are told apart by their first bytes. Each image is converted to the model's channels (RGB to gray by the
 * BT.601 luma weights 0.299, 0.587, 0.114; gray to RGB replicated), scaled with its aspect kept by the smallest
 * factor at which it covers H x W (for a square input: its shorter side becomes H; the other side rounded to
 * nearest) and centre-cropped to H x W, so files may have any size; an image of the input's size is copied
 * exactly. Inputs are planar (C, H, W) floats, normalised per channel as x = (v / 255 - mean[c]) / std[c].
 *
 * Every file is decoded once here, over the OpenMP threads, so a corrupt, truncated, unreadable or too large file
 * (more than 256 MiB decoded) is reported now, by name (SNUG_E_FORMAT or SNUG_E_IO); so is a class folder without
 * images, or a dir without class folders. Nothing but the names, the labels and the normalisation is kept: each
 * micro-batch decodes its samples again, in parallel, and a file that has become unreadable since fails the
 * step (or evaluation) that reads it, with the file's name. */
typedef enum snug_resize {
    SNUG_RESIZE_AUTO = 0,   /* per axis: AREA where the image shrinks, BILINEAR where it grows */
    SNUG_RESIZE_AREA,       /* box filter: an output pixel is the mean of the source area it covers */
    SNUG_RESIZE_BILINEAR    /* the two nearest source pixels, half-pixel centres (OpenCV's INTER_LINEAR) */
} snug_resize;
/* Per-channel normalisation: x = (v / 255 - mean[c]) / std[c], c < channels (1 or 3). */
typedef struct snug_normalise {
    size_t channels;
    float mean[3];
    float std[3];
} snug_normalise;
/* Parses "MEAN/STD", 1 or 3 comma-separated values on each side (stds > 0), e.g. "0.5/0.25". */
snug_status snug_parse_normalise(const char *text, snug_normalise *out, snug_error *err);
/* The text snug_parse_normalise reads back (every float exactly). */
const char *snug_normalise_format(const snug_normalise *n, char *buf, size_t len);
typedef struct snug_image_folder_options {
    snug_shape input;                /* the model's per-sample input (C, H, W), C = 1 or 3 */
    snug_resize resize;
    const snug_normalise *normalise; /* NULL: computed over this folder's images when opened: the mean and the
                                        (population) standard deviation of v / 255 per channel after
                                        resize and crop, in double precision, the same for any thread count;
                                        a constant channel gets std 1 */
    const char *const *classes;      /* NULL: the folder's own class folders; else the class names to expect,
                                        in order (a validation folder opened with the training folder's
                                        classes): a class folder missing or extra there is an error naming it */
    size_t class_count;              /* the names in classes */
    size_t read_limit;               /* the most bytes reading one file may hold (its decoding and resize
                                        buffers, from its header): a file over it, or over the machine's
                                        memory, is refused before any file is decoded; 0: the machine only */
} snug_image_folder_options;
snug_status snug_image_folder_open(const char *dir, const snug_image_folder_options *o, snug_dataset **out,
                                   snug_error *err);

/* A view of count samples of inner (1 <= count <= its size), evenly spaced: sample i of the view is sample
 * floor(i * n / count) of inner. Borrows inner, which must outlive the view; free the view with
 * snug_dataset_free (inner stays). For cheap periodic evaluation on a representative part of a held-out set. */
snug_status snug_dataset_subset(const snug_dataset *inner, size_t count, snug_dataset **out, snug_error *err);

/* Data sets by name, sized for the model that reads them (what `snug train --data` takes):
 *   "mnist"              the MNIST IDX files in dir (NULL: data/mnist); evaluation part: t10k
 *   "mnist32"            the same centred in 1x32x32 (2 pixels of background around), for resnet20
 *   "brown"              the Brown corpus, dir/brown.txt (NULL: data/brown); byte-level text, the context the
 *                        model's input length; the last 10% is the held-out part
 *   "text:FILE"          any file, the same way
 *   "shapes"             synthetic shapes segmentation at the model's H x W: train_samples training samples
 *                        (seed 1), 500 evaluation samples (seed 2)
 *   "segmentation:DIR"   PNG images and masks (snug_segmentation_open); evaluation part: DIR/val when it
 *                        exists, else none (or, when no training part is asked for, DIR itself)
 *   "csv:FILE[,FILE2]"   a CSV table (snug_csv_open, labels in the last column), standardised: every feature
 *                        column to zero mean and unit variance over FILE's rows; evaluation part: FILE2 when
 *                        given (standardised with FILE's statistics, its labels FILE's classes), else none (or,
 *                        when no training part is asked for, FILE itself). The model's input must be F x 1 x 1
 *                        for F feature columns. A FILE that exists as named, comma and all, is one table
 *   "images:DIR"         labelled images, one folder per class (snug_image_folder_open) at the model's (C, H, W):
 *                        the training part DIR/train, normalised as the options say or else by its own
 *                        statistics; the evaluation part DIR/val (none when it does not exist), opened with the
 *                        training part's classes and normalisation. When no training part is asked for, DIR/val
 *                        alone, normalised as the options say or else by its own statistics */
typedef struct snug_data {
    snug_dataset *train;     /* NULL unless asked for */
    snug_dataset *eval;      /* the evaluation part; NULL when the data set has none */
    const char *kind;        /* "mnist", "mnist32", "brown", "text", "shapes", "segmentation", "csv", "images" */
    const char *eval_name;   /* what the evaluation part is called: "test", "held-out", "evaluation", ... */
    char unit[48];           /* what a sample is: "images", "windows of 256 bytes" */
    char source[1100];       /* where the samples come from: a folder, a file, "synthetic shapes ..." */
} snug_data;

/* Whether name names a data set; when not, why (into why). */
bool snug_data_name_valid(const char *name, char *why, size_t len);
/* How a named data set is drawn: the shapes' training samples; an image folder's normalisation (NULL: computed
 * over its training part) and resize mode. */
typedef struct snug_data_options {
    size_t train_samples;             /* "shapes" */
    const snug_normalise *normalise;  /* "images:DIR" */
    snug_resize resize;               /* "images:DIR" */
    size_t read_limit;                /* "images:DIR": snug_image_folder_options.read_limit (a run's budget) */
    const struct snug_weights_data *trained; /* what weights say of their training data, when no training part
                                         is asked for: "csv:FILE" is read as the weights' training table was
                                         (snug_csv_options.trained), and an evaluation part that names its
                                         classes must name the weights' classes in order (else SNUG_E_ARG) */
} snug_data_options;
/* train_samples 2000, normalise NULL, resize SNUG_RESIZE_AUTO. */
snug_data_options snug_data_options_default(void);
/* Opens the data set name names for a model whose input has the per-sample shape `input` (it fixes a text's
 * context, the shapes' H x W, an image folder's C x H x W): the training part when want_train, and the
 * evaluation part. dir: where its files are (NULL: its default). opt: NULL for snug_data_options_default. */
snug_status snug_data_open(const char *name, const char *dir, snug_shape input, bool want_train,
                           const snug_data_options *opt, snug_data *d, snug_error *err);
void snug_data_close(snug_data *d);

void snug_dataset_free(snug_dataset *ds);
size_t snug_dataset_size(const snug_dataset *ds);
snug_shape snug_dataset_sample_shape(const snug_dataset *ds);
size_t snug_dataset_classes(const snug_dataset *ds);
/* The normalisation a data set's samples were made with, when it says one (MNIST, image folders, and views and
 * frames of them): true and *out filled; false otherwise. */
bool snug_dataset_normalisation(const snug_dataset *ds, snug_normalise *out);
/* The name of class i of a data set that names its classes (an image folder: its class folders; a CSV table with
 * named labels), else NULL (also for i beyond its classes). The string belongs to ds. */
const char *snug_dataset_class_name(const snug_dataset *ds, size_t i);
/* The bytes a data set holds in this process while `threads` threads read it: what it keeps (MNIST's labels,
 * the copies of snug_dataset_from_arrays, an image folder's names and labels) and what decoding needs per thread
 * (one PNG or JPEG image and the decoder's state; for an image folder its largest file and the resize buffers).
 * Files are read in pieces, never mapped or held whole, and a view (snug_dataset_subset) holds nothing of its
 * own; a data set of callbacks counts 0 (what the caller holds is the caller's). A run counts these bytes in its
 * data category (snug_plan_request.data_bytes). */
size_t snug_dataset_memory(const snug_dataset *ds, int threads);

/* ---------------------------------------------------------------------------------------------------------
 * Plans: what one optimizer step needs, byte by byte and by category, computed from the graph alone (planning
 * allocates no engine memory, so models far larger than the machine can be planned).
 * ------------------------------------------------------------------------------------------------------- */
typedef enum snug_optim_kind { SNUG_OPTIM_SGD = 0, SNUG_OPTIM_ADAMW } snug_optim_kind;

typedef struct snug_optim_config {
    snug_optim_kind kind;
    float lr;             /* base learning rate, before the schedule and the scaling rule */
    float momentum;       /* SGD: 0 disables the momentum buffer (and its memory) */
    bool nesterov;        /* SGD */
    float weight_decay;   /* SGD: added to the gradient (L2); AdamW: decoupled, lr * wd * p */
    float beta1, beta2, eps;  /* AdamW */
} snug_optim_config;

/* SGD, lr 0.05, momentum 0.9, no weight decay; AdamW's betas 0.9 and 0.999 and eps 1e-8 for when kind is
 * switched to SNUG_OPTIM_ADAMW. Switching to AdamW, set lr too: AdamW moves every parameter by about lr per
 * step whatever its gradient's scale, so SGD's 0.05 diverges where SNUG_ADAMW_DEFAULT_LR trains. */
snug_optim_config snug_optim_config_default(void);

/* AdamW's usual base learning rate (Loshchilov and Hutter 2019; PyTorch's default), the CLI's without --lr. */
#define SNUG_ADAMW_DEFAULT_LR 1e-3f

typedef enum snug_checkpoint_kind {
    SNUG_CHECKPOINT_NONE = 0, /* keep everything backward needs */
    SNUG_CHECKPOINT_SQRT,     /* about sqrt(n) segments (Chen et al. 2016): O(sqrt n) memory, one extra forward;
                                 a segment whose recompute would not lower the plan's total is kept whole */
    SNUG_CHECKPOINT_EVERY,    /* segments of `every` layers, spared as SQRT's */
    SNUG_CHECKPOINT_AUTO,     /* the least recompute whose plan fits the budget */
    SNUG_CHECKPOINT_CHEAP,    /* recompute only cheap layers (element-wise ops, normalisations, copies: under 16
                                 FLOPs per output element, not shrinking their input as pooling does) whose
                                 inputs backward keeps anyway, just before the backward that needs them; every
                                 convolution and matrix product output is kept. conv-norm-ReLU stacks keep one
                                 tensor per layer instead of two for one extra element-wise pass; a no-op where
                                 nothing cheap is worth dropping (an MLP, a plain CNN). */
    SNUG_CHECKPOINT_DEFAULT,  /* snug_plan_request_default's: AUTO when the micro-batch is SNUG_MICRO_BATCH_AUTO
                                 and there is a budget (the micro-batch and policy chosen together, as `snug train
                                 --mem` does), else NONE; a plan's request holds what it resolved to */
} snug_checkpoint_kind;

typedef struct snug_checkpoint_policy {
    snug_checkpoint_kind kind;
    size_t every;             /* SNUG_CHECKPOINT_EVERY: layers per segment */
} snug_checkpoint_policy;

/* Parses "none", "cheap", "sqrt", "every:N", "auto". */
snug_status snug_parse_checkpoint(const char *text, snug_checkpoint_policy *out, snug_error *err);
/* Writes "none", "cheap", "sqrt", "every:4", "auto" into buf. */
char *snug_format_checkpoint(snug_checkpoint_policy p, char *buf, size_t len);

/* In snug_plan_request.micro_batch: the micro-batch is chosen for the budget. */
#define SNUG_MICRO_BATCH_AUTO SIZE_MAX

/* The number format of a run's activations and products (docs/precision.md). Parameters, gradients, optimizer
 * state and the sums of gradients over micro-batches are float32 in both. */
typedef enum snug_precision {
    SNUG_PRECISION_FP32 = 0,  /* float32 throughout */
    SNUG_PRECISION_BF16,      /* bfloat16 mixed precision: every layer's output is rounded to bfloat16 (nearest,
                                 ties to even) as it is made, and the outputs kept for backward are stored in
                                 bfloat16, half the bytes; the weights of the matrix products (linear,
                                 convolutions) enter them rounded to bfloat16; products sum in float32; losses,
                                 normalisation statistics, softmax and gradients stay float32 */
} snug_precision;

/* Parses "fp32" or "bf16" (also "float32", "bfloat16"). */
snug_status snug_parse_precision(const char *text, snug_precision *out, snug_error *err);
/* "fp32" or "bf16". */
const char *snug_precision_name(snug_precision p);

/* What multiplies the linear layers' matrices (snug_plan_request.products). snug's own packed products: their
 * bits depend neither on the thread count nor on how a batch is split; in float32 on CPUs with AVX-512
 * (src/kernels/sgemm.c), and in bf16 plans from bfloat16 operands (src/kernels/bgemm.c: vdpbf16ps where the CPU
 * has AVX512_BF16; the weights and gradients are rounded to bfloat16 as it packs them: docs/precision.md). The
 * BLAS multiplies in float32, and its bits may depend on both. A plan records what it chose
 * (snug_plan_summary.products), so that two plans of one process can differ only by their requests. */
typedef enum snug_products {
    SNUG_PRODUCTS_AUTO = 0,   /* snug's own where they pay on this CPU: float32 with AVX-512, bf16 plans' with
                                 AVX512_BF16 on an AMD core, whose vdpbf16ps does twice an FMA's work in an
                                 FMA's time (else float32 products of their bfloat16 values); the BLAS elsewhere */
    SNUG_PRODUCTS_BLAS,       /* the BLAS, in float32 (in bf16 plans too, on the bfloat16 values) */
    SNUG_PRODUCTS_SNUG,       /* snug's own wherever snug has one for this CPU: float32 with AVX-512 (the BLAS
                                 without), and in bf16 plans the bfloat16 product on every CPU (a portable kernel,
                                 slow, where the CPU lacks AVX512_BF16: the same bits) */
} snug_products;

/* Parses "auto", "blas" or "snug". */
snug_status snug_parse_products(const char *text, snug_products *out, snug_error *err);
/* "auto", "blas" or "snug". */
const char *snug_products_name(snug_products p);

/* What a run asks of memory. Everything here changes what the step needs, nothing here changes what it
 * computes but the batch, the optimizer, the precision and the products (a micro-batch or checkpoint policy
 * gives the same gradient within float rounding, in either precision; other products, the same gradient within
 * float rounding in float32 and within bfloat16 rounding of the weights in bf16). */
typedef struct snug_plan_request {
    size_t batch;                       /* the global batch B, over every rank (>= 1) */
    size_t micro_batch;                 /* m: samples per forward/backward pass, 1..B; or SNUG_MICRO_BATCH_AUTO:
                                           with checkpoint AUTO, the micro-batch and policy of the best predicted
                                           throughput that fit; with a fixed policy, the largest micro-batch that
                                           fits under it, evened out over the same number of passes */
    snug_checkpoint_policy checkpoint;  /* AUTO: the least recompute that fits the budget; DEFAULT (the default):
                                           AUTO with SNUG_MICRO_BATCH_AUTO and a budget, else NONE */
    size_t budget;                      /* bytes the plan must fit; 0: no limit (then neither may be AUTO). What
                                           the engine reserves, and only that unless data_bytes and runtime_bytes
                                           say more: snug_plan_request_whole_process makes it bound the whole
                                           process, as `snug train --mem` does */
    bool may_exceed_budget;             /* give a plan over budget instead of refusing it (to compare candidates);
                                           the budget still leaves out what is optional and steers AUTO */
    snug_optim_config optim;            /* the optimizer, whose state is planned (SGD with momentum 1x the
                                           parameters, AdamW 2x, plain SGD none) */
    int threads;                        /* the workspace is sized per thread (>= 1) */
    int ranks;                          /* processes sharing every global batch (>= 1): m is planned for one
                                           rank's share, ceil(B / ranks) */
    size_t data_bytes;                  /* what the data sets hold beside the micro-batch buffers, counted in
                                           the data category (snug_plan_request_whole_process); 0: nothing */
    snug_precision precision;           /* the activations' and products' format (FP32 by default): BF16 halves
                                           what the kept activations take, so about twice the micro-batch fits */
    size_t runtime_bytes;               /* what the libraries under the engine hold beside the plan while it
                                           runs (the BLAS's packing panels and job tables, the C library's
                                           heaps), counted in the workspace category: SNUG_RUNTIME_BYTES per
                                           thread for a budget that bounds the process; 0: nothing */
    size_t prefetch;                    /* micro-batches read ahead of the step by background threads (decoded,
                                           augmented) into a ring of micro-batch buffers, counted in the data
                                           category; 0: each micro-batch is read when the step needs it */
    int data_threads;                   /* the threads that read ahead, each with its own decoding scratch
                                           (>= 1 when prefetch) */
    snug_products products;             /* what multiplies the linear layers' matrices (AUTO by default): it
                                           changes their workspace, and the bits within float rounding */
} snug_plan_request;

/* Batch B in one pass (m = B), checkpoint DEFAULT (none, or chosen with an automatic micro-batch), no budget, snug_optim_config_default(), the engine's threads,
 * one rank (a job of several sets snug_dist_size()), no read-ahead (prefetch 0; data_threads 1 once it is set). */
snug_plan_request snug_plan_request_default(size_t batch);
/* A batch larger than the `samples` a data set has takes them all: req's batch becomes samples (and a
 * micro-batch past it too), so that its plan reserves no more than the data fills. Returns the batch asked for;
 * samples 0 changes nothing. */
size_t snug_plan_request_fit_samples(snug_plan_request *req, size_t samples);
/* Makes req's budget bound the whole process but its fixed start-up memory (snug_engine_start): data_bytes
 * becomes what a run over these data sets holds beside its micro-batch buffers (each one's snug_dataset_memory
 * for req's threads, and the order a trainer draws an epoch of `train` in, a size_t per sample; either may be
 * NULL), and runtime_bytes SNUG_RUNTIME_BYTES per thread. */
void snug_plan_request_whole_process(snug_plan_request *req, const snug_dataset *train, const snug_dataset *eval);
/* In snug_plan_request.prefetch, for snug_plan_request_for_data: read ahead as the data set suits it
 * (snug_data_read_ahead). */
#define SNUG_PREFETCH_BY_DATA SIZE_MAX
/* Micro-batches a run over d reads ahead unless told otherwise: 2 for the data sets that decode files (images:,
 * segmentation:), else 0 (also for NULL). */
size_t snug_data_read_ahead(const snug_data *d);
/* Makes req the request of a training run over d, the one way `snug train` and `snug plan` build it, so that a
 * plan shows what a run reserves: the engine's threads (snug_system_info), the batch fitted to d's training part
 * (snug_plan_request_fit_samples), a prefetch of SNUG_PREFETCH_BY_DATA made snug_data_read_ahead(d), and the
 * whole process (snug_plan_request_whole_process over d's parts). d NULL counts no data set but still the
 * runtime allowance. Returns the batch asked for. */
size_t snug_plan_request_for_data(snug_plan_request *req, const snug_data *d);
/* An allowance per thread for snug_plan_request.runtime_bytes: above what the libraries were measured to add
 * to a process beside its plan on every model of the zoo (tests/cli/test_rss.sh), once their start-up memory
 * is measured (snug_engine_start). */
#define SNUG_RUNTIME_BYTES ((size_t)2 << 20)

typedef struct snug_plan snug_plan;

/* Why a request does not fit, and the ways out. */
typedef struct snug_plan_shortfall {
    size_t needed;                         /* bytes the request needs (where its micro-batch was free: the
                                              smallest plan there is) */
    size_t bytes[SNUG_MEM_NCATEGORIES];    /* needed, by category */
    size_t budget;
    size_t fixed;                          /* params + grads + optim: what no micro-batch or checkpointing lowers */
    size_t largest_micro_batch;            /* the largest micro-batch that fits with the requested policy; 0: none */
    size_t largest_with_recompute;         /* the largest that fits when activations may be recomputed (AUTO);
                                              0: none */
    size_t smallest_budget;                /* the least budget any plan fits: micro-batch 1, activations
                                              recomputed */
} snug_plan_shortfall;

/* Plans g for req. SNUG_OK: *out is the plan, within the budget (or over it only with may_exceed_budget).
 * SNUG_E_OOM: nothing is planned, *why (when not NULL) says why and what would fit, and err says the same in
 * words. SNUG_E_ARG: a bad request (batch 0, a micro-batch larger than the batch, AUTO without a budget, ...).
 * The plan keeps a pointer to g, which must outlive it. */
snug_status snug_plan_new(const snug_graph *g, const snug_plan_request *req, snug_plan **out,
                          snug_plan_shortfall *why, snug_error *err);
void snug_plan_free(snug_plan *p);
/* The request the plan answers, with the micro-batch and policy as planned (chosen where the request left them
 * free; AUTO stays AUTO, the summary says what it resolved to). */
const snug_plan_request *snug_plan_request_of(const snug_plan *p);

typedef enum snug_phase {
    SNUG_PHASE_FORWARD = 0,
    SNUG_PHASE_RECOMPUTE,   /* forward of a checkpointed segment, replayed during backward */
    SNUG_PHASE_BACKWARD,
    SNUG_PHASE_UPDATE,      /* clip + optimizer, once per optimizer step */
} snug_phase;

const char *snug_phase_name(snug_phase p);

typedef struct snug_plan_summary {
    size_t batch;                    /* the global batch B */
    int ranks;                       /* processes sharing it */
    size_t share;                    /* samples of each global batch one rank takes: ceil(B / ranks) */
    size_t micro_batch;              /* m, as asked or as chosen */
    bool micro_batch_chosen;         /* chosen for the budget (SNUG_MICRO_BATCH_AUTO) */
    size_t micro_batches;            /* k = ceil(share / m): forward/backward passes per optimizer step */
    size_t last_micro_batch;         /* the samples of the last of them (m when they are even) */
    size_t budget;                   /* the request's; 0: none */
    int threads;                     /* the workspace is sized for these */
    snug_checkpoint_policy requested; /* the policy asked for (AUTO stays AUTO) */
    snug_checkpoint_policy policy;   /* as resolved: AUTO becomes the segmentation it chose (every:N) */
    bool selective;                  /* only cheap outputs are recomputed (CHEAP, or a choice of AUTO) */
    size_t segments;                 /* recomputed segments (0 without checkpointing) */
    size_t spared_segments;          /* SQRT or EVERY segments kept whole: recomputing them would not lower the
                                        plan's total (the step's peak lies elsewhere) */
    size_t bytes[SNUG_MEM_NCATEGORIES];  /* reserved per category */
    size_t pending_bytes;            /* of the grads: weight-gradient contributions some layers defer to the
                                        end of a window at small micro-batches (the same bits, less traffic);
                                        only where the budget has room */
    size_t kept_bytes;               /* of the params: what some layers derive from their weights once per
                                        window instead of once per micro-batch; only where the budget has room */
    size_t read_ahead_bytes;         /* of the data: the ring of micro-batches read ahead (request.prefetch) */
    size_t regenerated_inputs;       /* layers that rebuild their input in backward from the layer that made
                                        it instead of keeping it (the same bits) */
    size_t regenerated_bytes;        /* the activations those inputs would have kept until backward */
    size_t batch_statistics_layers;  /* layers that normalise with the statistics of each micro-batch
                                        (BatchNorm): with more than one micro-batch or rank a step is not
                                        exactly one of the whole batch */
    size_t total;                    /* everything reserved: the run's memory to the byte */
    size_t activation_peak;          /* the activation arena: the most bytes live at once, after packing */
    size_t live_peak;                /* the largest sum of live activation bytes at one step (<= arena) */
    size_t peak;                     /* the plan's peak: the most bytes in use at one step of the schedule, every
                                        category (the fixed blocks, the live activations, that step's workspace,
                                        the data), as snug_plan_step counts them (<= total); the timeline marks it */
    size_t peak_step;                /* the first step (snug_plan_step) that holds it, */
    const char *peak_op;             /* its layer ("update" for the optimizer's step) */
    snug_phase peak_phase;           /* and its phase */
    double step_flops;               /* forward + backward + recompute FLOPs of one micro-batch */
    double recompute_flops;
    const char *products;            /* what the plan chose to multiply the linear layers' matrices (from its
                                        request's products, its precision and this CPU): "blas", "snug fp32"
                                        (snug's packed float32 product) or "snug bf16" (its bfloat16 product) */
} snug_plan_summary;

void snug_plan_summarize(const snug_plan *p, snug_plan_summary *s);

/* Every buffer a plan reserves, one row each: first the activation arena's (outputs, saved tensors, gradients of
 * activations), then the blocks live over the whole step (layer "(model)": parameters, their gradients, the
 * optimizer's state, the input batch, the runtime, ...), then the workspace of every step that uses one (its
 * lifetime that one step). The rows live at a step, less those in place, add up to snug_plan_step's bytes of
 * that step, category by category: at summary.peak_step, to summary.peak. */
typedef struct snug_plan_buffer_info {
    const char *layer;            /* the layer that owns it */
    const char *what;             /* "output", "gradient", "saved", "recomputed output", and in bf16 "packed
                                     output" (kept from forward to backward), "unpacked output" (read from
                                     it after forward) and "packed gradient" (an activation gradient stored
                                     in bfloat16); "workspace"; a block's name ("parameters", ...) */
    const char *dtype;            /* "fp32", "bf16", or "own" (saved bytes in the op's own layout) */
    snug_mem_category category;
    size_t bytes;
    size_t offset;                /* in the activation arena (activations), else 0: the start of its block */
    size_t first_step, last_step; /* lifetime, in schedule steps (snug_plan_step) */
    bool in_place;                /* continues another buffer's memory (an element-wise op over its input) */
} snug_plan_buffer_info;

size_t snug_plan_buffer_count(const snug_plan *p);
void snug_plan_buffer(const snug_plan *p, size_t i, snug_plan_buffer_info *b);

typedef struct snug_plan_step_info {
    const char *layer;
    snug_phase phase;
    size_t bytes[SNUG_MEM_NCATEGORIES];  /* live during this step, per category */
    double flops;
} snug_plan_step_info;

/* The schedule of one optimizer step with one micro-batch: forward, backward (with recompute), update. */
size_t snug_plan_step_count(const snug_plan *p);
void snug_plan_step(const snug_plan *p, size_t i, snug_plan_step_info *s);

/* A chosen plan among its alternatives, as `snug plan` shows them: the chosen plan's request at micro-batches 1,
 * 2, 4, ... below B, B and the chosen micro-batch, each under none, cheap and sqrt (and auto with a budget) and
 * the chosen policy, kept even over the budget (summary.total against summary.budget says which fit); in order of
 * micro-batch, then policy. The set takes `chosen` over: it is freed with the set, or at once on failure. */
typedef struct snug_plan_set snug_plan_set;
snug_status snug_plan_set_new(snug_plan *chosen, snug_plan_set **out, snug_error *err);
void snug_plan_set_free(snug_plan_set *s);
size_t snug_plan_set_count(const snug_plan_set *s);
const snug_plan *snug_plan_set_at(const snug_plan_set *s, size_t i);  /* NULL past the end */
size_t snug_plan_set_chosen(const snug_plan_set *s);                  /* the chosen plan's index */
/* The chosen micro-batch without checkpointing (the chosen plan itself when that is what it is). */
const snug_plan *snug_plan_set_baseline(const snug_plan_set *s);
/* The set as one JSON document named `title`: the candidates with their summaries, the chosen plan with its
 * baseline and, with buffers, every buffer of it. A NUL-terminated text to free(), or NULL when out of memory. */
char *snug_plan_set_json(const snug_plan_set *s, const char *title, bool buffers);
/* The set as text for people, as `snug plan` prints it: the table of candidates (the chosen row marked '*'), the
 * chosen plan's summary (its split into micro-batches, what it reserves against the budget, whether the
 * machine's memory holds it, its recompute, and what checkpointing saves against the baseline) and, with
 * buffers, every buffer of the chosen plan, titled `title`. SNUG_E_IO when out refused the text. */
snug_status snug_plan_set_print(FILE *out, const snug_plan_set *s, const char *title, bool buffers,
                                snug_error *err);
/* A plan's checkpoint policy as asked for, with what auto resolved to ("none", "sqrt", "every:4", "auto: every:3
 * selective"), into buf; returns buf. */
char *snug_plan_policy_label(const snug_plan_summary *s, char *buf, size_t len);
/* The recompute FLOPs of a plan's micro-batch as a percentage of its step FLOPs (0 without recompute). */
double snug_plan_recompute_percent(const snug_plan_summary *s);

/* The memory timeline of plan: bytes in use per category over one optimizer step, beside `baseline` (the same
 * micro-batch without checkpointing, on the same scale; may be NULL), titled by `title`. Written to path as an
 * SVG picture or a CSV table by its extension (.svg, .csv), atomically: a reader never sees half a file. */
snug_status snug_plan_timeline_write(const snug_plan *plan, const snug_plan *baseline, const char *title,
                                     const char *path, snug_error *err);

/* ---------------------------------------------------------------------------------------------------------
 * Training: a trainer runs one plan. Optimizers, schedules and clipping act once per optimizer step, after a
 * whole window of micro-batches.
 * ------------------------------------------------------------------------------------------------------- */
typedef enum snug_schedule_kind { SNUG_SCHEDULE_CONSTANT = 0, SNUG_SCHEDULE_COSINE } snug_schedule_kind;

typedef struct snug_schedule_config {
    snug_schedule_kind kind;
    long warmup_steps;    /* linear warmup from 0 to the peak LR over these optimizer steps (cosine only) */
    float min_lr_ratio;   /* cosine decays to lr * min_lr_ratio at the last step */
    bool linear_scaling;  /* Goyal et al. 2017: peak LR = lr * batch / reference_batch */
    size_t reference_batch;
} snug_schedule_config;

/* The learning rate at optimizer step `step` (0-based) of `total_steps`, for a global batch `batch`. */
float snug_schedule_lr(const snug_schedule_config *s, float base_lr, size_t batch, long step, long total_steps);

typedef struct snug_step_stats {
    long step;              /* optimizer steps taken so far (skipped ones not counted) */
    long epoch;             /* 0-based */
    long steps_per_epoch;
    long total_steps;
    size_t items;           /* items (samples) in this window: the loss normaliser N */
    size_t micro_batches;   /* k of this window */
    double loss;            /* sum of item losses over the window / items */
    float lr;
    float grad_norm;        /* before clipping */
    bool skipped;           /* the loss or the gradient was not finite: no update, schedule held */
    long first_step;        /* the step this process began at: 0, or a resumed run's state's */
    size_t run_samples;     /* samples of every window of the run, those before a resume included */
    double samples_per_s;   /* this process's samples over this process's training time (process_s) */
    double elapsed_s;       /* the run's training time so far, a resumed run's earlier processes included (the
                               state keeps it); evaluations between steps (snug_trainer_evaluate from the
                               progress callback) are left out */
    double process_s;       /* this process's training time so far, measured like elapsed_s */
} snug_step_stats;

/* What an evaluation counts as one item, from the shape of the loss's logits. */
typedef enum snug_eval_kind {
    SNUG_EVAL_SAMPLES = 0, /* logits (classes): one label per sample (classification) */
    SNUG_EVAL_TOKENS,      /* logits (T, classes): one target per token (a language model; a byte for byte-level
                              text) */
    SNUG_EVAL_PIXELS,      /* logits (classes, H, W): one target per pixel (segmentation) */
} snug_eval_kind;

/* The scores of a data set: every item whose target is not ignored (-1) counts once. */
typedef struct snug_eval_result {
    size_t items;          /* counted items: samples, tokens or pixels */
    double loss;           /* mean cross-entropy per item, in nats; for byte-level text, nats per byte */
    double accuracy;       /* fraction of items whose argmax over the classes equals the target: classification
                              accuracy, next-token accuracy, or pixel accuracy */
    snug_eval_kind kind;
    size_t classes;        /* the logits' class count */
    double bits;           /* loss / ln 2: bits per item (bits per byte for byte-level text) */
    double mean_iou;       /* SNUG_EVAL_PIXELS: the mean over classes of IoU = TP / (TP + FP + FN), counted over
                              every pixel of the set (not per image); a class that neither occurs nor is predicted
                              is left out of the mean. 0 for the other kinds */
    double foreground_iou; /* SNUG_EVAL_PIXELS with 2 classes: the IoU of class 1 (0 when class 1 neither occurs
                              nor is predicted); 0 otherwise */
} snug_eval_result;

/* Random changes to the training images, drawn afresh for every sample in every epoch: each draw is a pure
 * function of (seed, epoch, sample index) through the counter-based generator, so a run is reproducible, a
 * resumed run replays the same changes, and neither the micro-batch split nor the ranks change them. Applied to
 * image samples (C, H, W) as they are read for training (never for evaluation), in pixel units when the data set
 * says its normalisation (snug_dataset_normalisation) and in its own units otherwise; per-pixel targets (one per
 * pixel: segmentation) move with their image, and pixels that come from outside it are ignored
 * (SNUG_IGNORE_TARGET). All zero: none. */
typedef struct snug_augment {
    bool flip;          /* mirror left-right with probability 1/2 */
    size_t crop_pad;    /* random crop with padding: the image shifted by dy, dx uniform in [-crop_pad, crop_pad],
                           what comes in from outside filled with black (pixel value 0); 0: none */
    float brightness;   /* pixels times a factor uniform in [1 - brightness, 1 + brightness] (0..1); 0: none */
    float contrast;     /* distances from the image's mean times a factor uniform in [1 - contrast, 1 + contrast]
                           (0..1); 0: none. With a known normalisation, jittered pixels are clamped to [0, 1] */
} snug_augment;

/* Parses a comma-separated list: "flip", "crop:P", "brightness:X", "contrast:X" (e.g. "flip,crop:4"); "none" or
 * "" is no augmentation. SNUG_E_ARG names the item that is wrong. */
snug_status snug_parse_augment(const char *text, snug_augment *out, snug_error *err);
/* The canonical text of a (what snug_parse_augment reads back): "flip,crop:4", or "none". */
const char *snug_augment_format(const snug_augment *a, char *buf, size_t len);

/* Called after every optimizer step; return false to stop the run early. */
typedef bool (*snug_progress_fn)(const snug_step_stats *st, void *user);

/* What a run does with its plan: everything here but the plan's own choices. */
typedef struct snug_train_config {
    long epochs;
    long max_steps;          /* stop after this many optimizer steps; 0: no limit */
    bool drop_last;          /* drop an epoch's last window when it holds fewer than B samples */
    bool shuffle;
    uint64_t seed;
    float clip_norm;         /* global-norm clipping threshold; 0 disables */
    int max_nonfinite;       /* a step whose loss or gradient is not finite is skipped (no update, the schedule held,
                                counted); after this many in a row the run stops (its state written when it has a
                                state folder) */
    snug_optim_config optim; /* updates the weights; must be the optimizer the plan was made for
                                (snug_plan_request.optim: its kind, and for SGD whether it has momentum, decide the
                                state the plan reserves): snug_trainer_new refuses a disagreement, naming both.
                                Set both from one value (req.optim = cfg.optim) */
    snug_schedule_config schedule;
    snug_progress_fn progress;
    void *progress_user;
    /* Scores while training: every eval_every optimizer steps (0: never) but after the last, snug_trainer_evaluate
     * over eval_data, handed to on_eval with progress_user; on_eval returns false to stop the run. The time they
     * take is not training time (snug_step_stats.elapsed_s). */
    long eval_every;
    const snug_dataset *eval_data;
    bool (*on_eval)(const snug_step_stats *st, const snug_eval_result *res, void *user);
    /* The run's state (snug_trainer_save_state), written by snug_trainer_fit into state_dir (NULL: never) every
     * state_every optimizer steps (0: not by count), at least every state_every_seconds of training (0: not by
     * time), when the run stops on request or on non-finite values, and after its last step; the newest
     * state_keep (>= 1) are kept, each with state_extra (the caller's text, may be NULL). */
    const char *state_dir;
    long state_every;
    double state_every_seconds;
    int state_keep;
    const char *state_extra;
    /* When *stop becomes non-zero (a signal handler may set it), fit finishes the step in progress, writes the
     * state (with a state_dir) and returns SNUG_E_INTERRUPTED; over several ranks, when any rank's does, all
     * stop after the same step. NULL: never. */
    const volatile sig_atomic_t *stop;
    /* Over several ranks: the most seconds a collective (an all-reduce of the loss, the item count, the
     * gradients or the scores, the broadcast of the parameters) waits for the ranks that have not reached it.
     * Past it the job ends (MPI_Abort, exit status 1) with one message that names the ranks that did not arrive
     * (or says that every rank arrived and the collective itself did not complete), so that a rank stopped, hung
     * or cut off never leaves the others waiting forever. 0: wait forever (a rank under a debugger). A job of one
     * rank waits for nothing. Pass the same value to snug_dist_init to bound the job's start-up too. */
    double rank_timeout_seconds;
    /* Random changes to the training samples (snug_augment); none by default. */
    snug_augment augment;
    /* The run's log (snug_run_log_open; .jsonl or .csv), NULL: none. Opened by the trainer's first
     * snug_trainer_fit (a trainer that continues a state keeps the file's lines up to the state's step) and
     * closed with the trainer: a line per optimizer step, and one per snug_trainer_evaluate from then on, those
     * named eval_name (NULL: "evaluation"). snug_trainer_new checks that it can be written (snug_check_output). */
    const char *log_path;
    const char *eval_name;
    /* Told once, with progress_user, when the log cannot be written any more (a full disk): the run goes on
     * without it, and the message says so. NULL: not told. */
    void (*on_log_failed)(const char *message, void *user);
} snug_train_config;

/* Defaults: 1 epoch, shuffle, seed 1, snug_optim_config_default(), constant LR, no clipping, stop after 10
 * consecutive non-finite steps; no state folder (states every 10 minutes and the newest 2 kept once there is
 * one), no stop flag; collectives wait at most 10 minutes for a rank. */
snug_train_config snug_train_config_default(void);

typedef struct snug_trainer snug_trainer;

/* Reserves every byte of plan (within its budget) and initialises the parameters from cfg->seed. SNUG_E_ARG
 * when cfg's optimizer needs other state than the plan's, or cfg is invalid; SNUG_E_OOM, before anything is
 * reserved, when the plan needs more than this machine offers (snug_plan_check_machine with
 * snug_machine_memory_get: a plan over physical memory or the control group's limit would be killed by the
 * kernel while its memory is zeroed), and when the system refuses memory. The trainer keeps pointers to plan and
 * its graph, which must outlive it; the batch is the plan's. */
snug_status snug_trainer_new(const snug_plan *plan, const snug_train_config *cfg, snug_trainer **out,
                             snug_error *err);
void snug_trainer_free(snug_trainer *tr);
/* Replaces the trainer's run configuration for its next snug_trainer_fit (checked as snug_trainer_new checks it;
 * on error nothing changes): a program that trains in several calls gives each its epochs or step limit, its
 * evaluation, log, state folder and callbacks. The optimizer's kind must stay the plan's; what a continued run
 * must keep (batch, optimizer, seed, schedule, clipping, data order: snug_trainer_load_state's checks) is the
 * caller's to keep. A log of another path closes the open one; the new one opens at the next fit. */
snug_status snug_trainer_configure(snug_trainer *tr, const snug_train_config *cfg, snug_error *err);

/* The optimizer steps of one epoch over `samples` samples (windows of the plan's batch; the last one short
 * unless drop_last) and of the whole run (epochs of them, capped by max_steps): what snug_trainer_fit takes. */
void snug_trainer_run_length(const snug_trainer *tr, size_t samples, long *steps_per_epoch, long *total_steps);

/* Runs the run over the dataset from where the trainer stands (a new trainer: the start; after
 * snug_trainer_load_state: the window after the state's) to its end (cfg's epochs, capped by max_steps), calling
 * cfg->progress after each optimizer step; a run already at its end takes no step. */
snug_status snug_trainer_fit(snug_trainer *tr, const snug_dataset *train, snug_error *err);

/* Computes the gradient of one global batch (the samples at `indices`) into the gradient buffers, split into
 * micro-batches, normalised by the item count of the whole batch; no optimizer step. Zeroes the gradients
 * first. Sets *loss to the window's loss. */
snug_status snug_trainer_gradients(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                                   double *loss, snug_error *err);
/* One optimizer step on one global batch: gradients, clipping, update, schedule. */
snug_status snug_trainer_step(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                              snug_step_stats *st, snug_error *err);

/* Scores ds with the current parameters: forward only, micro-batch by micro-batch through the trainer's own
 * buffers (no memory beyond the plan; the per-class counts of mean_iou are a small host array of 3 x classes
 * sizes). Dropout is the identity and BatchNorm uses its running statistics. Over several ranks each scores
 * its contiguous share and the sums are all-reduced, so every rank returns the result over the whole set. */
snug_status snug_trainer_evaluate(snug_trainer *tr, const snug_dataset *ds, snug_eval_result *res,
                                  snug_error *err);

/* The logits of every sample of ds with the current parameters, as snug_trainer_evaluate computes them (forward
 * only, micro-batch by micro-batch through the trainer's buffers, dropout the identity, BatchNorm's running
 * statistics), written to logits: snug_dataset_size(ds) samples of snug_graph_output_shape's elements each, in
 * sample order. ds's targets are read but not scored (SNUG_IGNORE_TARGET serves). Every rank predicts the whole
 * set; nothing is collective. */
snug_status snug_trainer_predict(snug_trainer *tr, const snug_dataset *ds, float *logits, snug_error *err);
/* snug_trainer_evaluate that also counts which class each item is predicted as: confusion[t * classes + p]
 * becomes the items of target t whose argmax is p, over the whole set (every rank's share), for the loss's
 * `classes` (snug_trainer_classes). confusion is the caller's, classes x classes counts; it is zeroed first. */
snug_status snug_trainer_evaluate_confusion(snug_trainer *tr, const snug_dataset *ds, snug_eval_result *res,
                                            size_t *confusion, snug_error *err);
/* The class count of the trainer's loss. */
size_t snug_trainer_classes(const snug_trainer *tr);

/* Checks that ds fits the trainer's model: sample shape = the input's, class count = the loss's, targets per
 * sample = the items the loss scores, at least one sample. fit and evaluate check this too; call it to fail
 * before any work. The message names both shapes. */
snug_status snug_trainer_check_dataset(const snug_trainer *tr, const snug_dataset *ds, snug_error *err);

/* Parameters, in graph order: name, element count, values and gradients (owned by the trainer). Non-trainable
 * buffers (BatchNorm's running statistics) are listed too, with *grads = NULL. The gradients are the window's
 * after snug_trainer_gradients; after snug_trainer_step they are spent and hold no meaning (the update zeroes
 * most, and leaves those that the next window's first writer writes whole, a linear layer's, as they were).
 * The values may be written through the pointer at any time between calls, and the next window reads them (a
 * bf16 trainer that handed out a values pointer rounds its linear weights again at every window instead of
 * taking the copy its update wrote: pass values = NULL to read only names, sizes and gradients). */
size_t snug_trainer_param_count(const snug_trainer *tr);
/* Elements of every parameter and buffer of the trainer's model (the "N parameters" of a report). */
size_t snug_trainer_param_elements(const snug_trainer *tr);
const char *snug_trainer_param(const snug_trainer *tr, size_t i, size_t *numel, float **values, float **grads);

void snug_trainer_memory(const snug_trainer *tr, snug_mem_report *rep);
/* The plan the trainer runs. */
const snug_plan *snug_trainer_plan(const snug_trainer *tr);
/* Forward + backward FLOPs of one sample. */
double snug_trainer_flops_per_sample(const snug_trainer *tr);

/* Writes the weights to path as safetensors (https://github.com/huggingface/safetensors), readable by
 * safetensors.torch.load_file: an 8-byte little-endian header length n; n bytes of JSON, one entry per tensor
 * {"<name>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}} and "__metadata__" (format "pt",
 * producer, model, steps), padded with spaces so that the data starts 8-byte aligned; then the tensors,
 * contiguous, little-endian float32, in graph order. When the trainer's fit trained on a data set that names its
 * classes or says its normalisation, the metadata also holds "classes" (a JSON array of the names) and
 * "normalise" (snug_normalise_format), and for a standardised CSV table "standardise" (JSON: "columns", "label",
 * "classes", "mean", "std"), which snug_weights_data_read gives back.
 * Every parameter and every non-trainable buffer (BatchNorm's
 * running statistics) is written under its snug name, which follows PyTorch's state_dict ("conv1.weight",
 * "bn1.running_mean"); a tied weight is written once, under the name of the layer that owns it. Atomic: written
 * to path.tmp, flushed to disk, renamed; a failed save leaves an existing file untouched. Over several ranks only
 * rank 0 writes (every rank holds the same parameters); the others return SNUG_OK at once. */
snug_status snug_trainer_save(const snug_trainer *tr, const char *path, snug_error *err);
/* Whether a file can be written at path as snug_trainer_save writes it (path.tmp created beside it, then renamed),
 * checked before a long run rather than after it: the folder exists and takes a new file (path.tmp is created
 * and removed), and path is not a folder. `what` names the file in the message ("weights file"). SNUG_E_IO when
 * not. */
snug_status snug_check_output(const char *path, const char *what, snug_error *err);

/* What saved weights say of the data they were trained on (snug_trainer_save writes it when snug_trainer_fit
 * trained on a data set that names its classes or says its normalisation: an image folder, a CSV table). */
typedef struct snug_weights_data {
    size_t classes;        /* names in class_names; 0: the file names none */
    char **class_names;
    bool has_normalise;    /* the training set's normalisation, to read other images of it alike */
    snug_normalise normalise;
    snug_table_stats table; /* a CSV training table's columns and standardisation ("standardise"); columns 0:
                               none */
} snug_weights_data;
/* Reads it from the safetensors file at path (checked as snug_trainer_load checks it). A file without it gives
 * zeros; malformed entries SNUG_E_FORMAT. */
snug_status snug_weights_data_read(const char *path, snug_weights_data *out, snug_error *err);
void snug_weights_data_free(snug_weights_data *d);

/* Reads every parameter and buffer of the model from the safetensors file at path (snug_trainer_save's, or one
 * written from a PyTorch state_dict with the same names), replacing the initialisation; nothing else of the
 * trainer changes. Every name of the model must be in the file as F32 with the model's shape, and the file must
 * hold no other tensor (PyTorch's "<bn>.num_batches_tracked" counters excepted: snug keeps none, they are
 * skipped). A malformed file (shorter than its header says, a bad header length, JSON that does not parse or is
 * not a table of tensors, offsets out of range, overlapping or leaving gaps), missing or extra names (the first
 * few listed), another dtype or shape, a value that is NaN or infinite (SNUG_E_NONFINITE, naming the tensor and
 * the first such index): each is an error that says which, and the parameters are left as they were (every value
 * is read and checked before any is copied; only a file that fails or changes while the values are copied, after
 * every check passed, leaves them partly loaded). Every
 * rank reads the file itself (like the data, it must be on every machine). */
snug_status snug_trainer_load(snug_trainer *tr, const char *path, snug_error *err);

/* ---- The training state: stop at any moment, resume exactly (docs/resume.md) ---- */

/* Writes the complete state of the run into the folder dir (made when missing) as state-<N>.safetensors, N the
 * global batches taken: parameters, buffers and optimizer state as tensors (the weights under snug_trainer_save's
 * names, "optim.<name>.<slot>" beside them), and in the metadata the batch, the run's configuration, every
 * counter the next step reads, `extra` (any text of the caller's, may be NULL) and a CRC-32C of the whole file.
 * Atomic: written beside, synced, renamed, and the folder synced; then only the newest `keep` (>= 1) states are
 * kept. On failure (a full disk) the states written before are intact and err names the newest. path (may be
 * NULL) receives the file's name. Over several ranks rank 0 writes (every rank holds the same state). */
snug_status snug_trainer_save_state(const snug_trainer *tr, const char *dir, int keep, const char *extra,
                                    char *path, size_t path_len, snug_error *err);

/* What a state file holds, read without a trainer: enough to make the trainer that continues it. */
typedef struct snug_state_info {
    char path[4096];          /* the state file */
    char model[64];           /* its graph's name */
    size_t batch;             /* the global batch */
    snug_precision precision; /* the plan's (a state written before precisions existed: FP32) */
    snug_train_config run;    /* the run's configuration (no progress callback) */
    long step;                /* optimizer steps taken */
    long epoch;               /* the epoch it continues in, 0-based */
    char *extra;              /* the caller's text ("" when none); snug_state_info_free releases it */
    char skipped[2048];       /* newer files of the folder that are not valid states, each with what is wrong */
} snug_state_info;

/* The newest valid state of the folder dir: the state files from the newest on are checked (checksum, header,
 * contents) and the first that passes is described; those skipped are listed in info->skipped. SNUG_E_IO when
 * dir cannot be read or holds no state file, SNUG_E_FORMAT when none is valid (the message lists why). */
snug_status snug_state_latest(const char *dir, snug_state_info *info, snug_error *err);
/* The same for one state file. */
snug_status snug_state_read(const char *path, snug_state_info *info, snug_error *err);
void snug_state_info_free(snug_state_info *info);

/* Continues the run of the state file at path in tr: parameters, buffers, optimizer state and counters replace
 * the trainer's. tr must be for the same model (every tensor by name and shape) with the same batch, optimizer,
 * seed, schedule, clipping and data order as the state (the message names the first setting that differs, with
 * both values); its epochs and max_steps may differ (a longer run extends the state's). Every rank reads the
 * file. On any error the trainer is left as it was. */
snug_status snug_trainer_load_state(snug_trainer *tr, const char *path, snug_error *err);

/* All-reduces of the gradients so far: one per window (snug_trainer_step, snug_trainer_gradients), whatever the
 * number of micro-batches or ranks. Counted in a job of one rank too, where the reduction is the identity. */
long snug_trainer_allreduce_count(const snug_trainer *tr);
/* Seconds spent in those all-reduces, waiting for the slowest rank included (0 in a job of one). */
double snug_trainer_allreduce_seconds(const snug_trainer *tr);

/* Where a step's time goes, op by op. Off by default; while on, every op call of the training steps (not of
 * evaluations) is timed with two clock reads, and so are the parts of a step around the ops. */
typedef struct snug_op_time {
    const char *name;     /* the node's name ("conv1"), or a part around the ops: "(data)" (reading
                             micro-batches), "(deferred weight gradients)", "(all-reduce)", "(update)" (gradient
                             norm, clip, optimizer); owned by the trainer */
    const char *op;       /* the node's op ("conv2d"); "" for a part */
    snug_phase phase;     /* forward, recompute or backward; the parts: forward for data, backward for the
                             deferred gradients and the all-reduce, update for the update */
    double seconds;       /* wall time of its calls since profiling started (a backward step's time includes
                             zeroing the gradient buffers it is the first to write) */
    long calls;
} snug_op_time;

/* Starts profiling (the totals cleared) or stops it (the totals kept for snug_trainer_op_times until the next
 * start). SNUG_E_OOM when the timers cannot be allocated (a few bytes per step of the schedule); profiling then
 * stays off. */
snug_status snug_trainer_profile(snug_trainer *tr, bool on, snug_error *err);
/* The totals: one entry per step of the schedule that ran while profiling (forward, recompute and backward of
 * every node, in schedule order), then the parts that ran. Writes at most cap entries into out (which may be
 * NULL with cap 0) and returns how many there are. */
size_t snug_trainer_op_times(const snug_trainer *tr, snug_op_time *out, size_t cap);

/* How the data kept up with the steps, since the trainer was made (measured whether profiling or not). */
typedef struct snug_data_timing {
    double wait_seconds;        /* the steps' time spent waiting for their micro-batches (read ahead: the stall
                                   while the ring was empty, and the copy out of it; else reading them) */
    long micro_batches;         /* the micro-batches the steps took */
    double read_ahead_seconds;  /* the read-ahead threads' time reading (decoding, augmenting), beside the steps */
    size_t read_ahead_samples;  /* the samples they read */
    long read_ahead_misses;     /* micro-batches the steps had to read themselves while reading ahead (none
                                   when the steps take the epoch's windows in order, as snug_trainer_fit does) */
} snug_data_timing;
void snug_trainer_data_timing(snug_trainer *tr, snug_data_timing *out);

/* ---- The record of a run: a log of its steps and evaluations, and its curve (docs/data.md) ---- */
typedef struct snug_run_log snug_run_log;
/* Opens the run's log at path, its format by extension: .jsonl (one JSON object per line) or .csv (a header
 * row, then one row per line; evaluation rows leave the step columns empty and vice versa); SNUG_E_ARG for
 * another. resume_step < 0: a new log (an existing file is replaced); >= 0: a continued run: the lines of the
 * existing file up to and including optimizer step resume_step are kept (those after it belong to steps the
 * resumed run takes again; a missing file starts a new log) and new lines follow; the kept part is rewritten
 * atomically (temporary file, fsync, rename) before anything is appended. A malformed line among those read
 * (SNUG_E_FORMAT) names the file and the line. Every line is written whole and flushed at once, so a run killed
 * mid-way leaves whole lines and at most one partial last line, which readers ignore. Over several ranks only
 * rank 0 writes; the others get a log that writes nothing. */
snug_status snug_run_log_open(const char *path, long resume_step, snug_run_log **out, snug_error *err);
/* One optimizer step: step, epoch, loss, lr, grad_norm (before clipping), skipped, items, micro_batches,
 * samples_per_s, elapsed_s, and memory_bytes: the caller's value, or with 0 the process's resident bytes now
 * (snug_process_resident; null when the system does not say). Numbers are written in the fewest digits that read
 * back as the same float or double; a value that is not finite is null in JSON, nan, inf or -inf in CSV. After a
 * line fails to be written (SNUG_E_IO) the log writes no more. */
snug_status snug_run_log_step(snug_run_log *log, const snug_step_stats *st, size_t memory_bytes, snug_error *err);
/* One evaluation after step st->step: loss, accuracy, items, and for pixels mean_iou (and foreground_iou with two
 * classes); `name` says which set ("test", "validation", "held-out": 1 to 63 printable bytes). */
snug_status snug_run_log_eval(snug_run_log *log, const snug_step_stats *st, const snug_eval_result *res,
                              const char *name, snug_error *err);
/* Flushes, syncs and closes (NULL is fine); a failed final flush is reported. */
snug_status snug_run_log_close(snug_run_log *log, snug_error *err);
/* Draws the log at log_path (.jsonl or .csv) as an SVG at svg_path (atomic write): training loss per step (thin,
 * gaps where it is not finite, plus a smoothed line: an exponential moving average with weight 0.9,
 * bias-corrected, as TensorBoard's smoothing 0.9) and evaluation loss (points joined, one series per set) against
 * optimizer steps on the left axis; accuracy, or mean IoU when the log has it, in percent on a right axis when the
 * log has evaluations; epochs marked along the x axis; titled `title` (NULL: the log's file name). Each series is
 * an element with an id ("train-loss", "train-loss-smoothed", "eval-loss", "eval-accuracy" or "eval-mean-iou",
 * a second set's "eval-loss-2", ...), class "series" and a <title>. An empty log draws empty axes. SNUG_E_IO when
 * the log cannot be read, SNUG_E_FORMAT for a malformed line (file:line), SNUG_E_ARG for another extension. */
snug_status snug_curve_write(const char *log_path, const char *svg_path, const char *title, snug_error *err);

/* ---------------------------------------------------------------------------------------------------------
 * Distributed: data parallelism over MPI (`mpirun -np R snug train ...`). Every rank takes a contiguous shard of
 * each global batch (rank r: samples [floor(r*B/R), floor((r+1)*B/R)) of the window), accumulates it in its own
 * micro-batches, and the ranks sum their gradients with one all-reduce per optimizer step; the item count N is
 * summed over the ranks before the first forward, so the gradient is the one of the whole global batch.
 * Parameters start from rank 0's (broadcast by snug_trainer_new), and every rank applies the same update.
 * Built without MPI, or outside an MPI launcher, a process is rank 0 of 1 and nothing here costs anything.
 * ------------------------------------------------------------------------------------------------------- */
/* Joins the job when an MPI launcher started this process (MPI_Init); otherwise MPI is not touched and the
 * process is a job of one. Call it first, before creating trainers; every rank then runs the same calls, in the
 * same order (trainer creation, steps, evaluation are collective).
 *
 * rank_timeout_seconds (0: wait forever; pass snug_train_config.rank_timeout_seconds) bounds the start-up:
 * MPI_Init and the set-up of a communicator after it wait for every rank of the job, and cannot be cancelled.
 * Past it, a rank stopped, hung or never started would leave the others waiting forever, so this process writes
 * "snug: rank R (pid P on HOST): the start-up of the MPI job did not complete within the rank timeout of T s:
 * <the step still waiting>; check that every rank of the job is running ..., or raise the rank timeout; ending
 * the job" to stderr and exits with status 1 (the launcher then ends the other ranks). SNUG_E_IO when MPI fails. */
snug_status snug_dist_init(int *argc, char ***argv, double rank_timeout_seconds, snug_error *err);
/* snug_dist_init joined a job of an MPI launcher, even one of one rank. Its stdout is then the launcher's: Open
 * MPI gives every rank a pseudo-terminal whatever mpirun's own output is, so isatty() cannot tell whether the
 * output lands on a terminal or in a file. */
bool snug_dist_joined(void);
/* Leaves the job (MPI_Finalize) when snug_dist_init joined one. */
void snug_dist_finalize(void);
int snug_dist_rank(void);  /* 0 .. size-1; 0 outside a job */
int snug_dist_size(void);  /* 1 outside a job */
/* A rank that cannot go on: writes message and a newline to stderr and ends the whole job with exit status 1
 * (MPI_Abort), so that no rank is left waiting in a collective. */
void snug_dist_abort(const char *message);  /* does not return */

/* ---------------------------------------------------------------------------------------------------------
 * The machine
 * ------------------------------------------------------------------------------------------------------- */
typedef struct snug_system_info {
    int threads;             /* OpenMP threads the engine uses */
    const char *simd;        /* best SIMD level of this CPU: "AVX-512", "AVX2", "SSE2", ... */
    const char *blas;        /* "OpenBLAS 0.3.21 ..." */
    const char *blas_kernel; /* the kernel the BLAS picked for this CPU, e.g. "SkylakeX" */
    bool blas_kernel_slow;   /* the BLAS fell back to a kernel far below what this CPU can do */
    const char *gemm;        /* what multiplies the linear layers' matrices in plans whose request leaves the
                                choice to snug (SNUG_PRODUCTS_AUTO): "snug AVX-512" (snug's own packed product,
                                on AVX-512 CPUs), "snug AVX-512 (bf16 runs: AVX512_BF16)" where bf16 plans take
                                its bfloat16 product, or "BLAS" */
} snug_system_info;

void snug_system_info_get(snug_system_info *info);
/* The OpenMP (and BLAS) threads the engine uses; n <= 0: one per core. Process-wide. */
void snug_set_threads(int n);

/* The memory this process can ever hold: the machine's physical memory and, inside a container or a job
 * scheduler's allocation, its control group's limit (cgroup v2 memory.max, v1 memory.limit_in_bytes: the
 * tightest on the group's path). Ceilings, not the memory free at the moment, which moves with every other
 * process: what a plan can never get, not what it may have to wait or swap for. */
typedef struct snug_machine_memory {
    size_t physical;  /* bytes of physical memory; 0: unknown */
    size_t cgroup;    /* the control group's limit; 0: none (or not readable) */
    size_t usable;    /* the smaller of the two that are known; 0: unknown, and nothing is checked */
} snug_machine_memory;

/* Reads this machine's figures (from sysconf, /proc/self/cgroup and /sys/fs/cgroup). */
void snug_machine_memory_get(snug_machine_memory *m);

/* Whether plan p can be reserved within machine m: SNUG_OK when its total is at most m->usable (or m->usable is
 * 0); else SNUG_E_OOM, and err says what the plan needs by category, what the machine offers, and the way out:
 * when the parameters, gradients and optimizer state alone are over, that no micro-batch or checkpointing lowers
 * them (a smaller model, or an optimizer with less state); otherwise, that a smaller micro-batch or
 * checkpointing does, by planning for a budget of at most m->usable. The budget does not enter: a plan far under
 * a large budget fits a machine its budget does not. */
snug_status snug_plan_check_machine(const snug_plan *p, const snug_machine_memory *m, snug_error *err);

/* This process's resident memory now and at its peak so far, in bytes (VmRSS and VmHWM of /proc/self/status);
 * false, and zeros, where the system does not say. */
bool snug_process_resident(size_t *now, size_t *peak);

/* Starts the engine's threads and the BLAS now rather than at the first step, so that their stacks and the
 * BLAS's own buffers are resident, and returns the process's resident bytes then: the program's fixed memory
 * (code, libraries, threads), outside any budget. A run that measures it before it opens its data and reserves
 * its plan can hold itself to `budget + program` resident bytes (what `snug train` reports). 0 where the system
 * does not say. Call it after snug_set_threads. */
size_t snug_engine_start(void);
/* Writes "resident peak: 25.4 MiB, the program's 7.7 MiB and 17.7 MiB within the budget" for the program's
 * bytes as snug_engine_start gave them. NULL where the system does not say. */
char *snug_format_resident_peak(size_t program, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* SNUG_H */
