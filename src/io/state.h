/* The training state's file names and metadata keys, shared by the writer (state_save.c) and the reader
 * (state_load.c). */
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

#endif
