/* Flags of `snug train`, `snug plan` and `snug eval`: one table per command (cli/flags.h parses and prints it),
 * the defaults the help documents, and the checks that need several flags at once. */
#define _POSIX_C_SOURCE 200809L
#include "cli/args.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/commands.h"
#include "cli/data_sets.h"
#include "cli/flags.h"
#include "cli/process_start.h"

static const char *const on_off[] = {"on", "off", NULL};
static const char *const optim_choices[] = {"sgd", "adamw", NULL};
static const char *const schedule_choices[] = {"constant", "cosine", NULL};
static const char *const scaling_choices[] = {"none", "linear", NULL};
static const char *const progress_choices[] = {"auto", "on", "off", NULL};
static const char *const precision_choices[] = {"fp32", "bf16", NULL}; /* in snug_precision's order */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcasecmp(s + n - k, suffix) == 0;
}

/* --timeline, --log: a name whose extension says the format (snug_plan_timeline_write, snug_run_log_open). */
static bool timeline_path(const char *path) { return path && (ends_with(path, ".svg") || ends_with(path, ".csv")); }
static bool log_path(const char *path) { return path && (ends_with(path, ".jsonl") || ends_with(path, ".csv")); }

#define OPT(field) offsetof(cli_train_options, field)
#define FLAG(n, k, field, mv, h) .name = (n), .kind = (k), .offset = OPT(field), .metavar = (mv), .help = (h)
#define MODEL_HELP                                                                                              \
    "a built-in model, a model file (a path with a '/' or ending in .ini, e.g. ./my.ini: docs/model-files.md; " \
    "the built-in models are such files, in models/) or an ONNX model, FILE.onnx (docs/onnx.md) [cnn]"
#define CLASSES_FLAG {FLAG("classes", F_SIZE, classes, "N", "the model's class count: the outputs of the "  \
    "layer its loss reads (a linear's out, a conv2d's out_channels), instead of the model file's [the file's]"), \
    .min = 1, .max = 1u << 20}
#define PRECISION_FLAG {FLAG("precision", F_CHOICE, plan.precision, "fp32|bf16", "bf16: outputs rounded to bfloat16, " \
    "kept for backward in half the bytes; parameters, gradients and sums float32 [fp32]"), .choices = precision_choices}

static const flag train_flags[] = {
    GROUP("Model and data"),
    {FLAG("model", F_NAME, model, "NAME", MODEL_HELP), .names = snug_model_names, .what = "model", .files = true},
    CLASSES_FLAG,
    {FLAG("data", F_STRING, data, CLI_DATA_VALUES,
          "data set: mnist (28x28), mnist32 (MNIST padded to 32x32, for resnet20), brown (the Brown corpus, "
          "byte-level, the last 10% held out; context = the model's input length), text:FILE (any file, the same "
          "way), shapes (synthetic shapes segmentation at the model's H x W), segmentation:DIR (PNGs in DIR/images "
          "and DIR/masks, evaluated on DIR/val if it exists), images:DIR (labelled PNG/JPEG images, one folder per "
          "class in DIR/train and DIR/val, resized and centre-cropped to the input), csv:FILE[,FILE2] (a table, "
          "labels in the last column; FILE2 evaluates) (docs/data.md) [mnist]")},
    {FLAG("data-dir", F_STRING, data_dir, "DIR",
          "where the data set's files are: mnist, mnist32: the IDX files [$SNUG_DATA_DIR, else data/mnist]; brown: "
          "brown.txt [data/brown]")},
    {FLAG("train-samples", F_SIZE, train_samples, "N", "shapes: training samples to draw [2000]"), .min = 1,
     .max = LONG_MAX},
    {FLAG("augment", F_STRING, augment, "LIST", "random changes of the training images, drawn per sample and "
          "epoch from --seed (a resumed run replays them): flip, crop:P (shift by up to P pixels, black fill), "
          "brightness:X, contrast:X; e.g. flip,crop:4 [none]")},
    {FLAG("normalise", F_STRING, normalise, "MEAN/STD", "images: per-channel normalisation in pixel units of [0, "
          "1], e.g. 0.5/0.25 or three values a side [computed over DIR/train, stored by --save]")},
    {FLAG("prefetch", F_SIZE, plan.prefetch, "N", "micro-batches decoded ahead of the step by background threads, "
          "in a ring planned in the data category [2 for images: and segmentation:, else 0]"), .min = 0, .max = 64},
    {FLAG("data-threads", F_INT, plan.data_threads, "N", "threads that decode ahead [1]"), .min = 1, .max = 64},
    {FLAG("init", F_STRING, init, "FILE",
          "start from the weights in a safetensors file (a --save of the same model) instead of the seeded "
          "initialisation; every tensor of the model must be in it, with its shape [none]")},

    GROUP("Batch and memory"),
    {FLAG("batch", F_SIZE, plan.batch, "B", "global batch: samples per optimizer step [64]"), .min = 1,
     .max = LONG_MAX},
    {FLAG("micro-batch", F_MICRO, plan.micro_batch, "M|auto",
          "samples per forward/backward pass; the gradients of ceil(B/M) micro-batches add up to one step, "
          "exactly as one batch of B; auto: the micro-batch and checkpoint policy that fit --mem best "
          "[auto with --mem, else = B]"),
     .min = 1, .max = LONG_MAX, .aux = OPT(micro_batch_given)},
    {FLAG("mem", F_BYTES, plan.budget, "SIZE",
          "memory budget, e.g. 64MiB, 1.5GiB, 500MB; all memory is planned and reserved before the first "
          "step, and a plan over the budget stops at once, naming the micro-batch that fits; under mpirun it "
          "is per rank (per process) [unlimited]")},
    {FLAG("checkpoint", F_CHECKPOINT, plan.checkpoint, "none|cheap|sqrt|every:N|auto",
          "gradient checkpointing: keep only segment inputs in forward and recompute the rest in backward; "
          "cheap: replay only element-wise and normalisation layers (one extra memory pass, a quarter to a "
          "third fewer activations in conv-norm-ReLU stacks), sqrt: about sqrt(n) segments, every:N: "
          "segments of N layers, auto: the least recompute that fits "
          "--mem [none; under --micro-batch auto, chosen with the micro-batch unless given]"),
     .aux = OPT(checkpoint_given)},
    PRECISION_FLAG,

    GROUP("Epochs and data order"),
    {FLAG("epochs", F_LONG, cfg.epochs, "N", "passes over the training set [1]"), .min = 1, .max = LONG_MAX},
    {FLAG("max-steps", F_LONG, cfg.max_steps, "N", "stop after N optimizer steps [0 = no limit]"), .min = 0,
     .max = LONG_MAX},
    {FLAG("drop-last", F_SWITCH, cfg.drop_last, NULL,
          "drop the last batch of an epoch when it holds fewer than B samples [off: train on it]")},
    {FLAG("shuffle", F_CHOICE, shuffle, "on|off", "reshuffle the training set every epoch [on]"),
     .choices = on_off},
    {FLAG("seed", F_U64, cfg.seed, "N", "seed of the parameter initialisation and the shuffling [1]")},

    GROUP("Optimizer"),
    {FLAG("optim", F_CHOICE, optim, "sgd|adamw", "optimizer [sgd]"), .choices = optim_choices},
    {FLAG("lr", F_FLOAT, cfg.optim.lr, "X", "base learning rate [0.05 for sgd, 0.001 for adamw]"), .fmin = 0,
     .fmax = UNBOUNDED, .fmin_open = true, .aux = OPT(lr_given)},
    {FLAG("momentum", F_FLOAT, cfg.optim.momentum, "X", "SGD momentum; 0 also saves its buffer [0.9]"),
     .fmin = 0, .fmax = 1, .fmax_open = true},
    {FLAG("nesterov", F_SWITCH, cfg.optim.nesterov, NULL, "SGD with Nesterov momentum [off]")},
    {FLAG("weight-decay", F_FLOAT, cfg.optim.weight_decay, "X",
          "SGD: L2 added to the gradient; AdamW: decoupled [0]"),
     .fmin = 0, .fmax = UNBOUNDED},
    {FLAG("beta1", F_FLOAT, cfg.optim.beta1, "X", "AdamW first-moment decay [0.9]"), .fmin = 0, .fmax = 1,
     .fmax_open = true},
    {FLAG("beta2", F_FLOAT, cfg.optim.beta2, "X", "AdamW second-moment decay [0.999]"), .fmin = 0, .fmax = 1,
     .fmax_open = true},
    {FLAG("eps", F_FLOAT, cfg.optim.eps, "X", "AdamW denominator epsilon [1e-8]"), .fmin = 0,
     .fmax = UNBOUNDED, .fmin_open = true},
    {FLAG("clip", F_FLOAT, cfg.clip_norm, "NORM", "clip the global gradient norm of each step to NORM [0 = off]"),
     .fmin = 0, .fmax = UNBOUNDED},
    {FLAG("max-skips", F_LONG, max_skips, "N", "steps with a non-finite loss are skipped; stop after N in a row [10]"),
     .min = 1, .max = 1000000},

    GROUP("Learning-rate schedule"),
    {FLAG("schedule", F_CHOICE, schedule, "constant|cosine", "learning-rate schedule [constant]"),
     .choices = schedule_choices},
    {FLAG("warmup", F_LONG, cfg.schedule.warmup_steps, "N",
          "cosine: linear warmup from 0 over the first N steps [0]"),
     .min = 0, .max = LONG_MAX},
    {FLAG("min-lr-ratio", F_FLOAT, cfg.schedule.min_lr_ratio, "X", "cosine: decay to lr * X at the last step [0]"),
     .fmin = 0, .fmax = 1},
    {FLAG("lr-scaling", F_CHOICE, lr_scaling, "none|linear",
          "linear: peak lr = lr * B / ref-batch (Goyal et al. 2017) [none]"),
     .choices = scaling_choices},
    {FLAG("ref-batch", F_SIZE, cfg.schedule.reference_batch, "N", "reference batch of --lr-scaling [256]"),
     .min = 1, .max = LONG_MAX},

    GROUP("Run and output"),
    {FLAG("threads", F_LONG, threads, "N", "threads for the engine and the BLAS [all cores]"), .min = 1,
     .max = 4096},
    {FLAG("rank-timeout", F_SECONDS, cfg.rank_timeout_seconds, "TIME",
          "under mpirun: when the start-up or a collective waits longer than this for a rank (stopped, hung, cut "
          "off), end the job with a message, naming the ranks a collective missed (90s, 10m, 2h; 0: forever) [10m]")},
    {FLAG("log-every", F_LONG, log_every, "N",
          "without a live line, log every N steps and the last [auto: about 20 lines per epoch]"),
     .min = 1, .max = LONG_MAX},
    {FLAG("progress", F_CHOICE, progress, "auto|on|off", "on: one live line rewritten in place; off: a plain step "
          "line every --log-every steps and the last [auto: live on a terminal, never under mpirun]"),
     .choices = progress_choices},
    {FLAG("evaluate", F_CHOICE, evaluate, "on|off", "score the test set after training [on]"),
     .choices = on_off},
    {FLAG("eval-every", F_LONG, eval_every, "N",
          "also score the evaluation part every N optimizer steps, a line each (a held-out curve); the time it "
          "takes is left out of the training time [0 = only after training]"),
     .min = 0, .max = LONG_MAX},
    {FLAG("eval-samples", F_SIZE, eval_samples, "N",
          "--eval-every scores N evenly spaced samples of the evaluation part, to keep each score cheap; the "
          "final score uses all [0 = all]"),
     .min = 0, .max = LONG_MAX},
    GROUP("Training state: stop at any moment, resume exactly (docs/resume.md)"),
    {FLAG("state", F_STRING, state, "DIR",
          "keep the run's whole state in DIR (made with its parents): written every --state-every steps, every "
          "--state-every-time, on SIGINT/SIGTERM (which stop the run after the step in progress) and at the end "
          "[none; with --resume: the folder resumed]")},
    {FLAG("state-every", F_LONG, cfg.state_every, "N", "write the state every N optimizer steps [0: by time only]"),
     .min = 0, .max = LONG_MAX},
    {FLAG("state-every-time", F_SECONDS, cfg.state_every_seconds, "TIME",
          "write the state at least this often, in training time (90s, 10m, 2h; 0: never by time) [10m]")},
    {FLAG("state-keep", F_LONG, state_keep, "K", "keep the newest K states [2]"), .min = 1, .max = 1000000},
    {FLAG("resume", F_STRING, resume, "DIR",
          "continue the run whose newest valid state is in DIR, with its flags; flags that do not change the "
          "result (--mem, --micro-batch, --checkpoint, --threads, output) may be given anew, and a larger "
          "--epochs or --max-steps extends the run [none]")},
    {FLAG("log", F_PATH, cfg.log_path, "FILE.jsonl|FILE.csv", "write a line per optimizer step and per "
          "evaluation (docs/data.md); `snug curve FILE` draws it; a resumed run keeps the lines up to its state's "
          "step [none]"), .accepts = log_path, .expect = "a .jsonl or a .csv file"},
    {FLAG("save", F_STRING, save, "FILE",
          "after training, write the weights (parameters and BatchNorm running statistics) to FILE as "
          "safetensors, under PyTorch state_dict names; written atomically (FILE.tmp, then renamed); under mpirun "
          "by rank 0 [none]")},
    {FLAG("help", F_HELP, help, NULL, "show this help and exit")},
};

#define NTRAIN_FLAGS (sizeof train_flags / sizeof train_flags[0])

#undef OPT
#define OPT(field) offsetof(cli_plan_options, field)

static const flag plan_flags[] = {
    GROUP("Model and data"),
    {FLAG("model", F_NAME, model, "NAME", MODEL_HELP), .names = snug_model_names, .what = "model", .files = true},
    CLASSES_FLAG,
    {FLAG("data", F_STRING, data, CLI_DATA_VALUES,
          "the data set snug train would read: its bytes, epoch order and read-ahead are counted, as train reserves "
          "them [none: not counted]")},
    {FLAG("data-dir", F_STRING, data_dir, "DIR", "where the data set's files are, as for snug train")},
    {FLAG("train-samples", F_SIZE, train_samples, "N", "shapes: training samples to draw [2000]"), .min = 1,
     .max = LONG_MAX},

    GROUP("Batch and memory"),
    {FLAG("batch", F_SIZE, plan.batch, "B", "global batch: samples per optimizer step [64]"), .min = 1,
     .max = LONG_MAX},
    {FLAG("mem", F_BYTES, plan.budget, "SIZE",
          "memory budget (per rank, for a run under mpirun): adds the fits column and the auto policy, and "
          "chooses the plan [none]")},
    {FLAG("micro-batch", F_MICRO, plan.micro_batch, "M|auto",
          "the micro-batch of the chosen plan; auto: the one that fits --mem best [auto with --mem, else = B]"),
     .min = 1, .max = LONG_MAX, .aux = OPT(micro_batch_given)},
    {FLAG("checkpoint", F_CHECKPOINT, plan.checkpoint, "none|cheap|sqrt|every:N|auto",
          "the checkpoint policy of the chosen plan [none; under --micro-batch auto, chosen with the "
          "micro-batch unless given]"),
     .aux = OPT(checkpoint_given)},
    PRECISION_FLAG,

    {FLAG("prefetch", F_SIZE, plan.prefetch, "N", "micro-batches read ahead of the step, planned in the data "
          "category (snug train --prefetch) [2 for --data images: and segmentation:, else 0]"), .min = 0, .max = 64},
    {FLAG("data-threads", F_INT, plan.data_threads, "N", "threads that decode ahead [1]"), .min = 1, .max = 64},

    GROUP("Optimizer (its state is planned memory)"),
    {FLAG("optim", F_CHOICE, optim, "sgd|adamw", "optimizer: SGD keeps 1x params of state, AdamW 2x [sgd]"),
     .choices = optim_choices},
    {FLAG("momentum", F_FLOAT, plan.optim.momentum, "X", "SGD momentum; 0 also saves its buffer [0.9]"),
     .fmin = 0, .fmax = 1, .fmax_open = true},

    GROUP("Output"),
    {FLAG("layers", F_SWITCH, layers, NULL,
          "list every buffer of the chosen plan: layer, what, category, bytes, arena offset, lifetime [off]")},
    {FLAG("json", F_SWITCH, json, NULL, "print one JSON document instead of the text report [off]")},
    {FLAG("timeline", F_PATH, timeline, "FILE.svg|FILE.csv",
          "write the memory in use per category over one optimizer step, for the chosen plan and for the same "
          "micro-batch without checkpointing, as a picture (.svg) or a table (.csv) [none]"),
     .accepts = timeline_path, .expect = "a .svg or a .csv file"},
    {FLAG("threads", F_LONG, threads, "N", "threads the workspace is sized for [all cores]"), .min = 1,
     .max = 4096},
    {FLAG("help", F_HELP, help, NULL, "show this help and exit")},
};

#define NPLAN_FLAGS (sizeof plan_flags / sizeof plan_flags[0])

#undef OPT
#define OPT(field) offsetof(cli_eval_options, field)

static const flag eval_flags[] = {
    GROUP("Model, weights and data"),
    {FLAG("model", F_NAME, model, "NAME", MODEL_HELP), .names = snug_model_names, .what = "model", .files = true},
    CLASSES_FLAG,
    {FLAG("weights", F_STRING, weights, "FILE",
          "the safetensors file to score, e.g. what `snug train --save` wrote for the same model [required]")},
    {FLAG("data", F_STRING, data, CLI_DATA_VALUES,
          "data set, as for snug train; its evaluation part is scored: MNIST's test set, the held-out 10% of a "
          "text, the 500 evaluation shapes, DIR/val (else DIR itself; images:DIR: DIR/val read with the weights' "
          "normalisation, a table per class), csv:FILE,FILE2's FILE2 [mnist]")},
    {FLAG("data-dir", F_STRING, data_dir, "DIR",
          "where the data set's files are: mnist, mnist32: the IDX files [$SNUG_DATA_DIR, else data/mnist]; brown: "
          "brown.txt [data/brown]")},

    GROUP("Batch and memory"),
    {FLAG("batch", F_SIZE, plan.batch, "B", "samples per forward pass, at most the evaluation part's [64]"),
     .min = 1, .max = LONG_MAX},
    {FLAG("mem", F_BYTES, plan.budget, "SIZE",
          "memory budget; with it, the largest batch up to B whose plan fits (a training plan without optimizer "
          "state, whose buffers the evaluation reuses) [unlimited]")},
    PRECISION_FLAG,

    GROUP("Run"),
    {FLAG("threads", F_LONG, threads, "N", "threads for the engine and the BLAS [all cores]"), .min = 1,
     .max = 4096},
    {FLAG("help", F_HELP, help, NULL, "show this help and exit")},
};

#define NEVAL_FLAGS (sizeof eval_flags / sizeof eval_flags[0])

static const flag_table train_table = {train_flags, NTRAIN_FLAGS, offsetof(cli_train_options, help)};
static const flag_table plan_table = {plan_flags, NPLAN_FLAGS, offsetof(cli_plan_options, help)};
static const flag_table eval_table = {eval_flags, NEVAL_FLAGS, offsetof(cli_eval_options, help)};

/* The request every command starts from: batch 64 in one pass, no budget, no checkpointing, plain defaults;
 * the flags and the finish step fill in the rest. */
static snug_plan_request default_request(void) {
    snug_plan_request r = snug_plan_request_default(64);
    (void)cli_gemm_products(&r.products); /* main refused a value it does not know */
    r.optim = snug_optim_config_default(); /* the values the help documents (tests/cli/test_cli.sh) */
    return r;
}

/* Sets every value the help documents, so the help and the behaviour agree whatever the library defaults. */
static void set_defaults(cli_train_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->plan = default_request();
    opt->cfg = snug_train_config_default();
    snug_train_config *c = &opt->cfg;
    c->epochs = 1;
    c->max_steps = 0;
    c->drop_last = false;
    c->seed = 1;
    c->clip_norm = 0;
    c->rank_timeout_seconds = 600;
    c->optim = opt->plan.optim;
    c->schedule = (snug_schedule_config){.kind = SNUG_SCHEDULE_CONSTANT, .warmup_steps = 0,
                                         .min_lr_ratio = 0, .linear_scaling = false, .reference_batch = 256};
    opt->model = "cnn";
    opt->data = "mnist";
    opt->data_dir = NULL; /* the data set's own default (cli/data_sets.h) */
    opt->train_samples = 2000;
    opt->plan.prefetch = SNUG_PREFETCH_BY_DATA; /* snug_plan_request_for_data resolves it */
    opt->plan.data_threads = 1;
    opt->progress = CLI_PROGRESS_AUTO;
    opt->state_keep = c->state_keep;
    opt->max_skips = c->max_nonfinite;
}

static void set_plan_defaults(cli_plan_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->plan = default_request();
    opt->plan.prefetch = SNUG_PREFETCH_BY_DATA;
    opt->model = "cnn";
    opt->train_samples = 2000;
}

/* Evaluation plans as training would, with plain SGD: momentum 0 keeps no optimizer state. */
static void set_eval_defaults(cli_eval_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->plan = default_request();
    opt->plan.optim.momentum = 0;
    opt->model = "cnn";
    opt->data = "mnist";
}

/* The batch flags every command shares, into the request: --micro-batch auto is the default with --mem and
 * needs it, and with it the checkpoint policy is chosen too unless --checkpoint was given. */
static bool finish_batching(snug_plan_request *r, bool micro_given, bool checkpoint_given, char *msg, size_t len) {
    if (!micro_given) r->micro_batch = r->budget > 0 ? SNUG_MICRO_BATCH_AUTO : r->batch;
    const bool micro_auto = r->micro_batch == SNUG_MICRO_BATCH_AUTO;
    if (micro_auto && r->budget == 0) return flags_fail(msg, len, "--micro-batch auto needs --mem: the budget to fit");
    if (r->checkpoint.kind == SNUG_CHECKPOINT_AUTO && r->budget == 0)
        return flags_fail(msg, len, "--checkpoint auto needs --mem: the budget to fit");
    if (!micro_auto && r->micro_batch > r->batch)
        return flags_fail(msg, len, "--micro-batch %zu is larger than --batch %zu", r->micro_batch, r->batch);
    if (!checkpoint_given) r->checkpoint = (snug_checkpoint_policy){micro_auto ? SNUG_CHECKPOINT_AUTO : SNUG_CHECKPOINT_NONE, 0};
    return true;
}

/* Checks that need more than one flag, and maps the choices into the config. */
static bool finish(cli_train_options *opt, char *msg, size_t len) {
    snug_train_config *c = &opt->cfg;
    if (!finish_batching(&opt->plan, opt->micro_batch_given, opt->checkpoint_given, msg, len)) return false;
    if (!cli_data_valid(opt->data, msg, len)) return false;
    c->shuffle = opt->shuffle == 0;
    c->optim.kind = opt->optim == 1 ? SNUG_OPTIM_ADAMW : SNUG_OPTIM_SGD;
    /* Adam's step is about lr per parameter whatever the gradient's scale, so SGD's 0.05 makes it diverge */
    if (c->optim.kind == SNUG_OPTIM_ADAMW && !opt->lr_given) c->optim.lr = SNUG_ADAMW_DEFAULT_LR;
    c->schedule.kind = opt->schedule == 1 ? SNUG_SCHEDULE_COSINE : SNUG_SCHEDULE_CONSTANT;
    c->schedule.linear_scaling = opt->lr_scaling == 1;
    if (c->schedule.warmup_steps > 0 && c->schedule.kind != SNUG_SCHEDULE_COSINE)
        return flags_fail(msg, len, "--warmup needs --schedule cosine");
    if (c->optim.nesterov && (c->optim.kind != SNUG_OPTIM_SGD || c->optim.momentum == 0))
        return flags_fail(msg, len, "--nesterov needs --optim sgd with --momentum > 0");
    opt->plan.optim = c->optim; /* the optimizer whose state is planned is the one the run uses */
    c->state_keep = (int)opt->state_keep;
    c->max_nonfinite = (int)opt->max_skips;
    if (opt->resume && opt->init)
        return flags_fail(msg, len, "--resume continues a run from its state: --init does not apply");
    snug_error err;
    if (snug_parse_augment(opt->augment, &c->augment, &err) != SNUG_OK)
        return flags_fail(msg, len, "--augment: %s", err.message);
    opt->has_norm = opt->normalise != NULL;
    if (opt->has_norm && snug_parse_normalise(opt->normalise, &opt->norm, &err) != SNUG_OK)
        return flags_fail(msg, len, "--normalise: %s", err.message);
    return true;
}

static bool finish_plan(cli_plan_options *opt, char *msg, size_t len) {
    if (!finish_batching(&opt->plan, opt->micro_batch_given, opt->checkpoint_given, msg, len)) return false;
    opt->plan.optim.kind = opt->optim == 1 ? SNUG_OPTIM_ADAMW : SNUG_OPTIM_SGD;
    return !opt->data || cli_data_valid(opt->data, msg, len);
}

static bool finish_eval(cli_eval_options *opt, char *msg, size_t len) {
    if (!opt->weights)
        return flags_fail(msg, len, "--weights FILE is required: the safetensors file to score (snug train --save)");
    return finish_batching(&opt->plan, false, false, msg, len) && cli_data_valid(opt->data, msg, len);
}

bool cli_parse_train(int argc, char **argv, cli_train_options *opt, char *msg, size_t len) {
    set_defaults(opt);
    if (!flags_parse(&train_table, argc, argv, opt, msg, len)) return false;
    return opt->help || finish(opt, msg, len);
}

bool cli_parse_eval(int argc, char **argv, cli_eval_options *opt, char *msg, size_t len) {
    set_eval_defaults(opt);
    if (!flags_parse(&eval_table, argc, argv, opt, msg, len)) return false;
    return opt->help || finish_eval(opt, msg, len);
}

bool cli_parse_plan(int argc, char **argv, cli_plan_options *opt, char *msg, size_t len) {
    set_plan_defaults(opt);
    if (!flags_parse(&plan_table, argc, argv, opt, msg, len)) return false;
    return opt->help || finish_plan(opt, msg, len);
}

/* What every command's help ends with: the flag forms, the exit statuses, examples. */
static void help_tail(FILE *out, const char *runtime_errors, const char *examples) {
    fprintf(out, "\nEvery flag also takes the form --flag=value.\nExit status: 0 done, 1 runtime error (%s), 2 usage "
                 "error.\nExample: %s\n", runtime_errors, examples);
}

void cli_train_help(FILE *out) {
    fprintf(out,
            "usage: snug train [options]\n\n"
            "Train a model on a data set. The global batch B is split into micro-batches of M samples whose\n"
            "gradients are accumulated into one optimizer step; every byte is planned before the first step, so\n"
            "--mem is a promise: a run that would not fit stops at once and says which --micro-batch fits. With\n"
            "--mem and no --micro-batch, snug chooses the micro-batch and the checkpointing that fit best;\n"
            "`snug plan` shows every choice without training.\n\n"
            "Several processes or machines: `mpirun -np R snug train ...` runs R ranks; each takes a contiguous\n"
            "share of every global batch (B stays the global batch), splits it into micro-batches of M, and one\n"
            "all-reduce per optimizer step sums the gradients. Only rank 0 prints and saves; a failing rank ends\n"
            "the job with 'snug: rank N: ...'. See docs/distributed.md.\n");
    flags_print_help(out, &train_table);
    help_tail(out, "data file, memory budget, non-finite loss",
              "snug train --model cnn --batch 256 --micro-batch 32 --mem 64MiB --epochs 2\n"
              "         mpirun -np 4 snug train --model cnn --batch 256 --micro-batch 32 --mem 64MiB");
}

void cli_plan_help(FILE *out) {
    fprintf(out,
            "usage: snug plan [options]\n\n"
            "Show what one optimizer step of a model needs, byte by byte, without training: one row per\n"
            "micro-batch m (1, 2, 4, ... up to B) and checkpoint policy, by memory category, with where the\n"
            "activation peak falls and what recomputation costs. With --mem, the row that fits best is chosen\n"
            "(with --data, the plan `snug train --mem` reserves); it is marked with '*' and summarised.\n");
    flags_print_help(out, &plan_table);
    help_tail(out, "nothing fits the budget, the timeline file cannot be written",
              "snug plan --model cnn --batch 256 --mem 12MiB --data mnist --timeline cnn.svg");
}

void cli_eval_help(FILE *out) {
    fprintf(out,
            "usage: snug eval [options]\n\n"
            "Score saved weights on the evaluation part of a data set, without training: classification accuracy;\n"
            "for a language model the loss in nats and bits per byte; for segmentation the pixel accuracy and the\n"
            "mean IoU over classes (and the foreground IoU of two classes). The weights file must hold every\n"
            "tensor of the model with its shape (a --save of snug train for the same model). Memory is planned\n"
            "as for training, without optimizer state, and reserved before the first sample.\n");
    flags_print_help(out, &eval_table);
    help_tail(out, "weights or data file, memory budget",
              "snug train --model cnn --max-steps 200 --save cnn.safetensors\n"
              "         snug eval --model cnn --data mnist --weights cnn.safetensors");
}
