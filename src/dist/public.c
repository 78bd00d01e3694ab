/* The public face of src/dist (snug.h, "Distributed"): the same in the builds with and without MPI. */
#include "dist/dist.h"

snug_status snug_dist_init(int *argc, char ***argv, double rank_timeout_seconds, snug_error *err) {
    return dist_init(argc, argv, rank_timeout_seconds, err);
}

bool snug_dist_joined(void) { return dist_joined(); }

void snug_dist_finalize(void) { dist_finalize(); }

int snug_dist_rank(void) { return dist_get().rank; }

int snug_dist_size(void) { return dist_get().size; }

void snug_dist_abort(const char *message) { dist_abort(message); }
