/* A run's training state on disk: the files' names, the metadata's keys and text, a folder's states listed and
 * pruned (state_write.c), a state's metadata read back (state_read.c). The tensors are the trainer's
 * (train/state_save.c, train/state_load.c). */
#ifndef SNUG_IO_STATE_H
#define SNUG_IO_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snug.h"

#define STATE_VERSION 1
#define STATE_PREFIX "state-"
#define STATE_SUFFIX ".safetensors"
#define STATE_KEY "snug_state"        /* the run: batch, configuration, counters (JSON text) */
#define STATE_EXTRA_KEY "snug_extra"  /* the caller's text */
#define STATE_NAME_MAX 160            /* "optim." + a parameter name + "." + a slot name */

/* The slot names of an optimizer's state, as PyTorch's state_dict calls them. */
const char *state_slot_name(snug_optim_kind kind, int slot);

/* Whether name is a state file's ("state-<12 digits>.safetensors"), and its number. */
bool state_name_number(const char *name, uint64_t *v);
/* The numbers of the state files in dir, newest first (*out malloc'ed); 0 when none or dir cannot be read. */
size_t state_list(const char *dir, uint64_t **out);
/* dir made when missing; SNUG_E_IO when it cannot be, or is not a folder. */
snug_status state_folder(const char *dir, snug_error *err);
/* "DIR/state-<number>.safetensors" */
void state_path_of(const char *dir, uint64_t number, char *buf, size_t len);
/* "DIR/state-000000000123.safetensors" or, with tmp, "DIR/.state-000000000123.tmp" (where it is written first). */
void state_path(const char *dir, uint64_t number, bool tmp, char *buf, size_t len);
/* Keeps the newest `keep` states in dir; removes the older ones and any temporary file a killed writer left. */
void state_prune(const char *dir, int keep);

/* The counters the next step reads. */
typedef struct state_counters {
    long step, epoch, window, optim_steps;
    uint64_t windows;
    int nonfinite_run;
    size_t samples_seen;
    double train_seconds; /* the run's training time up to the state, earlier processes included (0 in a state
                             written before it was kept) */
} state_counters;

/* What a state says of its run besides the tensors. */
typedef struct state_meta {
    const char *model;
    size_t batch;
    bool bf16;
    const snug_train_config *run;
    state_counters counters;
} state_meta;

/* The STATE_KEY metadata's JSON text (free it with cJSON_free); NULL when out of memory. */
char *state_text(const state_meta *m);

struct st_file;
/* Opens the state file at path (io/safetensors.h: the bytes, the checksum, the layout) and reads its metadata
 * into info and *k. With keep_open, the file is left open in it on success (close it with st_file_close). */
snug_status state_read_info(const char *path, snug_state_info *info, state_counters *k, struct st_file *keep_open,
                            snug_error *err);

#endif
