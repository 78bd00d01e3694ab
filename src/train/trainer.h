/* The trainer's state: one graph, its plan at the chosen micro-batch, the memory reserved for it, the
 * executor bound to that memory, and the optimizer. */
#ifndef SNUG_TRAIN_TRAINER_H
#define SNUG_TRAIN_TRAINER_H

#include <pthread.h>

#include "core/mem.h"
#include "dist/dist.h"
#include "exec/exec.h"
#include "optim/optim.h"
#include "plan/plan.h"
#include "snug.h"

/* kept_copies.c: the kept bfloat16 copies of linear weights that the optimizer's update writes. */
typedef struct trainer_copies trainer_copies;

/* The parts of a training step around the ops, timed while profiling (profile.c). */
typedef enum trainer_part {
    PART_DATA,      /* reading micro-batches (and the window's targets, to count its items) */
    PART_DEFERRED,  /* the ops' deferred weight gradients, after the window's last backward */
    PART_ALLREDUCE, /* summing the window over the ranks */
    PART_UPDATE,    /* gradient norm, clip, optimizer */
    PART_COUNT
} trainer_part;

struct snug_trainer {
    const snug_graph *g;
    const snug_plan *public_plan;  /* the plan it runs (borrowed) */
    const plan *plan;              /* its internal form */
    size_t batch;                  /* the plan's global batch B */
    snug_train_config cfg;
    snug_mem mem;
    exec x;
    optim_state opt;
    optim_span *spans;     /* the trainable tensors, for opt.spans */
    trainer_copies *copies; /* the kept bf16 weights the update writes, and whether they are current; behind a
                              pointer so that the const snug_trainer_param can mark them stale. NULL: none */
    long step;             /* optimizer steps taken */
    long stat_updates;     /* training micro-batches whose BatchNorm statistics were kept (PyTorch's
                              num_batches_tracked: one per forward in training mode) */
    uint64_t windows;      /* global batches processed, skipped ones included: the dropout key's step */
    long total_steps;      /* for the schedule: set by fit, or cfg.max_steps */
    int nonfinite_run;     /* consecutive skipped steps */
    size_t window_items;   /* the item count N of the last window, over all ranks */
    size_t samples_seen;   /* of every window, over all ranks */
    long epoch, window;    /* where snug_trainer_fit goes on: the epoch (0-based) and its next window */
    long last_scored;      /* the step fit last scored eval_data after */
    long state_step;       /* the step of the last state fit wrote, when (training time, seconds), and after */
    double state_time;     /* which window (UINT64_MAX: none yet), so the end does not write it twice */
    uint64_t state_windows;
    double start_time;     /* when this process's first step began, and the steps and samples taken before it */
    long start_step;       /* (a resumed run's state): speeds count what this process trained */
    size_t start_samples;
    double earlier_seconds; /* the run's training time before this process (a resumed run's state's) */
    dist dist;             /* this process's rank in the job: it takes its shard of every window */
    long grad_allreduces;  /* all-reduces of the gradient block: one per window */
    double allreduce_s;    /* time in them */
    double part_seconds[PART_COUNT]; /* while profiling (x.profiling): the parts around the ops */
    long part_calls[PART_COUNT];
    snug_run_log *log;     /* cfg.log_path once fit opened it, else NULL */
    char *data_classes;    /* the training set's class names as a JSON array, for the saved weights; or NULL */
    char data_normalise[160]; /* its normalisation (snug_normalise_format), or "" */
    char *data_table;      /* a standardised CSV table's columns and statistics as JSON, or NULL */
    struct prefetch *pf;   /* the read-ahead thread and its ring (plan->ring_slots > 0), else NULL */
    pthread_mutex_t data_lock; /* with pf: held around every call into a data set (train/read.c) */
    double data_wait_s;    /* the steps' time waiting for (or reading) their micro-batches */
    long data_takes;       /* the micro-batches the steps took */
    long data_misses;      /* those not in the read-ahead ring while it ran */
    double read_ahead_s;   /* the read-ahead threads' time reading and their samples, over the readers freed */
    size_t read_ahead_samples;
};

/* Profiling: the clock before a part (0 when not profiling), and the time since added to the part. */
/* A line of the log could not be written (why): the run goes on without the log, cfg.on_log_failed told once. */
void trainer_drop_log(snug_trainer *tr, snug_error *why);
/* Starts the training clock at the first step this process takes (no-op once started). */
void trainer_start_clock(snug_trainer *tr);
/* This process's training time so far (0 before its first step); the run's adds tr->earlier_seconds. */
double trainer_process_seconds(const snug_trainer *tr);
double trainer_tick(const snug_trainer *tr);
void trainer_tock(snug_trainer *tr, trainer_part part, double t0);

struct st_tensor;
/* The parameters and buffers as tensors to write (safetensors.h), in graph order, into t (room for every
 * parameter of the graph); returns how many. */
size_t trainer_param_tensors(const snug_trainer *tr, struct st_tensor *t);

struct st_file;
/* load.c: tensor `name` of an open safetensors file (io/safetensors.h) read as the values of parameter p of g
 * (F32, p's shape) into v; every value finite. */
snug_status trainer_read_tensor(struct st_file *sf, const snug_graph *g, const graph_param *p, const char *name,
                                float *v, snug_error *err);

/* fit_state.c: the state written now (when the run has a state folder), and what follows a step of fit (a state
 * that is due, a stop that was asked for: *stop set and SNUG_E_INTERRUPTED). */
snug_status fit_state_write(snug_trainer *tr, snug_error *err);
snug_status fit_after_step(snug_trainer *tr, bool *stop, snug_error *err);

/* data_info.c: what fit remembers of its data set for snug_trainer_save (class names, normalisation). */
void trainer_remember_data(snug_trainer *tr, const snug_dataset *ds);

/* kept_copies.c. bind: gives the spans of the weights whose kept bfloat16 copy the plan holds those copies to
 * write (optim_span.copy16), after bind_spans; nothing where memory is refused (the ops then round them). */
void trainer_bind_copies(snug_trainer *tr);
void trainer_free_copies(snug_trainer *tr);
/* The update just wrote the parameters and the copies: every other derived weight is stale, the copies current. */
void trainer_copies_written(snug_trainer *tr);
/* A parameter may have changed outside the update: the copies are no longer current (const: see copies). */
void trainer_copies_stale(const snug_trainer *tr);
/* The caller holds a pointer to the parameters (snug_trainer_param): from now on the copies are never current. */
void trainer_copies_handed_out(const snug_trainer *tr);
/* Whether the copies are current, and from now on they are not (a window consumes the mark: a later one derives
 * everything again unless an update has marked them anew). */
bool trainer_copies_take_current(snug_trainer *tr);

/* Fills the parameters from the counter-based RNG, PyTorch's default initialisers (see graph.h). */
void trainer_init_params(snug_trainer *tr);

/* Checks that a dataset's samples and classes fit the model's input and loss. */
snug_status trainer_check_dataset(const snug_trainer *tr, const snug_dataset *ds, snug_error *err);

/* Adds the gradient of one global batch (indices[0..n)) into the gradient buffers: this rank's shard,
 * micro-batch by micro-batch, each scaled by 1/N with N the items of the whole batch over all ranks; then one
 * all-reduce sums the ranks' gradients. Sets *items = N, *loss = sum of item losses over all ranks / N, and
 * *micro_batches = this rank's k. Collective: every rank calls it with the same window. */
snug_status trainer_accumulate(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                               size_t *items, double *loss, size_t *micro_batches, snug_error *err);
/* The gradient buffers zeroed; the running statistics back to the last window's start (a skipped window). */
void trainer_zero_grads(snug_trainer *tr);
void trainer_restore_buffers(snug_trainer *tr);
/* The micro-batches this rank runs for a full global batch: its shard of the plan's batch over m. */
size_t trainer_window_micro_batches(const snug_trainer *tr);

/* nonfinite.c: where the last window (indices[0..n), just skipped) first met a non-finite value on this rank,
 * as text to append to a message (" : the first ... in layer 'fc1' ...", or "" when none was found here). Runs
 * the window's micro-batches again, checked step by step; leaves the gradients zero and the buffers restored.
 * Local: it calls no collective. */
void trainer_find_nonfinite(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n, char *msg,
                            size_t len);

#endif
