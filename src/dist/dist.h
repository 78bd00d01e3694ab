/* Data parallelism between processes: the ranks of one job, and the few collectives the trainer needs. Two
 * implementations, chosen at configure time: dist_mpi.c over MPI (MPI_COMM_WORLD), and dist_none.c, a job of one
 * rank whose collectives do nothing. The process-wide job state lives in the implementation file: besides the
 * thread pool, it is the only global state of the library.
 *
 * Every collective must be called by every rank in the same order with the same counts; a rank that cannot go on
 * calls dist_abort instead of returning, so that the others are not left waiting inside a collective. A rank
 * that can say nothing (stopped, hung, cut off) is caught by the timeout every collective takes: past it, the
 * collective ends the job itself, naming the ranks that did not arrive. */
#ifndef SNUG_DIST_DIST_H
#define SNUG_DIST_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

/* This process's place in the job. Outside an MPI launch (or before dist_init): rank 0 of 1. */
typedef struct dist {
    int rank;
    int size;
} dist;

dist dist_get(void);
/* dist_init joined a job of an MPI launcher (even one of one rank). */
bool dist_joined(void);

/* Joins the job when the process was started by an MPI launcher (mpirun, srun); otherwise it stays a job of one
 * and MPI is not initialised at all, so a plain run pays nothing for it. Idempotent. timeout_s (0: none) bounds
 * the start-up (MPI_Init, which waits for every rank, and the set-up of a communicator after it): past it the
 * process writes "snug: rank R (pid P on HOST): the start-up of the MPI job did not complete within the rank
 * timeout of T s: ..." and exits with status 1 (start_watch.h). */
snug_status dist_init(int *argc, char ***argv, double timeout_s, snug_error *err);
/* Leaves the job (MPI_Finalize) if dist_init joined one. */
void dist_finalize(void);
/* Writes message (if not NULL) and a newline to stderr, then ends every rank of the job with exit status 1
 * (MPI_Abort); in a job of one, exits with status 1. */
_Noreturn void dist_abort(const char *message);

/* What a reduction computes, element by element over the ranks. */
typedef enum dist_op { DIST_SUM = 0, DIST_MAX } dist_op;

/* In-place reductions: afterwards every rank holds the same result. Buffers of any length (split into calls of
 * at most INT_MAX elements, MPI's count type). A job of one returns at once.
 *
 * timeout_s (0: none) bounds how long one call waits for the other ranks. Past it the call does not return: it
 * writes "snug: rank R: rank S of N did not reach an all-reduce within the rank timeout of T s ..." (or, when
 * every rank reached it, that the collective did not complete) and ends the job with exit status 1. Of the ranks
 * that time out, the lowest that arrived speaks; the others give it a while (the timeout, at most 10 s, per rank
 * before them) to end the job before they speak. */
snug_status dist_allreduce_floats(float *buf, size_t n, double timeout_s, snug_error *err);   /* sum */
snug_status dist_allreduce_doubles(double *buf, size_t n, double timeout_s, snug_error *err); /* sum */
snug_status dist_allreduce_sizes(size_t *buf, size_t n, dist_op op, double timeout_s, snug_error *err);
/* Rank 0's buffer to every rank, with the same timeout. */
snug_status dist_broadcast_floats(float *buf, size_t n, double timeout_s, snug_error *err);

/* The contiguous shard of a global batch of n samples that `rank` of `size` takes: [*begin, *begin + *len),
 * begin = floor(rank * n / size). Shards differ by at most one sample; with n < size some are empty. */
void dist_shard(size_t n, int rank, int size, size_t *begin, size_t *len);

#endif
