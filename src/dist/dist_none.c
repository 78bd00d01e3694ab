/* The build without MPI: every process is a job of one rank, and a collective over one rank is the identity.
 * Compiled instead of dist_mpi.c when CMake finds no MPI (or SNUG_WITH_MPI=OFF). Nothing waits, so no timeout
 * applies. */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

dist dist_get(void) { return (dist){.rank = 0, .size = 1}; }

bool dist_joined(void) { return false; }

snug_status dist_init(int *argc, char ***argv, double timeout_s, snug_error *err) {
    (void)argc, (void)argv, (void)timeout_s, (void)err;
    return SNUG_OK;
}

void dist_finalize(void) {}

_Noreturn void dist_abort(const char *message) {
    fflush(stdout);
    if (message) fprintf(stderr, "%s\n", message);
    exit(1);
}

snug_status dist_allreduce_floats(float *buf, size_t n, double timeout_s, snug_error *err) {
    (void)buf, (void)n, (void)timeout_s, (void)err;
    return SNUG_OK;
}

snug_status dist_allreduce_doubles(double *buf, size_t n, double timeout_s, snug_error *err) {
    (void)buf, (void)n, (void)timeout_s, (void)err;
    return SNUG_OK;
}

snug_status dist_allreduce_sizes(size_t *buf, size_t n, dist_op op, double timeout_s, snug_error *err) {
    (void)buf, (void)n, (void)op, (void)timeout_s, (void)err;
    return SNUG_OK;
}

snug_status dist_broadcast_floats(float *buf, size_t n, double timeout_s, snug_error *err) {
    (void)buf, (void)n, (void)timeout_s, (void)err;
    return SNUG_OK;
}
