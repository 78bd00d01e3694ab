/* Writing a file whole or not at all, the one way every file snug writes for later goes to disk (weights, states,
 * run logs rewritten on resume, curves, memory timelines): the content goes to a temporary file beside the
 * target, which is flushed, synced to disk and renamed over the target; then the folder is synced, so that the
 * rename too survives a power cut. A reader, or a run killed at any moment, sees the old file or the new one,
 * never half of either. */
#ifndef SNUG_CORE_ATOMIC_FILE_H
#define SNUG_CORE_ATOMIC_FILE_H

#include <stdio.h>

#include "snug.h"

/* Writes the content into f. Returns SNUG_OK when it wrote all it meant to (a write the stream refused is found
 * afterwards through ferror), or the status of a failure it reported in err itself. */
typedef snug_status (*atomic_file_fill)(FILE *f, void *user, snug_error *err);

/* Writes path atomically with fill(f, user, err): into tmp (NULL: "PATH.tmp"; a name in path's folder, so that
 * the rename stays inside one file system), flushed, synced, renamed over path, the folder synced. On any failure
 * the temporary file is removed, a file already at path is left as it was, and err names `what` ("run log",
 * "weights file"), the file and the cause. */
snug_status atomic_file_write(const char *path, const char *tmp, const char *what, atomic_file_fill fill, void *user,
                              snug_error *err);

#endif
