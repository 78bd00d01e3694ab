/* The start-up watchdog of a job: MPI_Init and the collective set-up after it block until every rank has come,
 * and MPI can neither cancel them nor bound their wait. A rank stopped or hung before it joined would leave the
 * others waiting there forever, so a thread watches the start-up: past the timeout it writes one line to stderr
 * and ends this process with exit status 1 (the launcher then ends the other ranks). */
#ifndef SNUG_DIST_START_WATCH_H
#define SNUG_DIST_START_WATCH_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "snug.h"

#define START_WATCH_WHO_MAX 96

typedef struct start_watch {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct timespec deadline;  /* CLOCK_MONOTONIC */
    double timeout_s;
    bool running;              /* a thread watches (timeout_s > 0) */
    bool done;                 /* the start-up completed: the thread returns without a word */
    char who[START_WATCH_WHO_MAX]; /* "rank 1 of 2 (pid 4242 on node3)" */
    const char *step;          /* what is waiting now: "MPI_Init is still waiting for the launcher or a rank" */
} start_watch;

/* Starts watching: past timeout_s seconds (0: never; nothing starts) before start_watch_end, the process ends
 * with "snug: WHO: the start-up of the MPI job did not complete within the rank timeout of T s: STEP; ...".
 * SNUG_E_IO when the thread cannot be started. */
snug_status start_watch_begin(start_watch *w, double timeout_s, const char *who, const char *step, snug_error *err);
/* What the message names from now on: this process (NULL: unchanged) and the step it is in. */
void start_watch_at(start_watch *w, const char *who, const char *step);
/* The start-up completed: stops the thread (no-op when none runs). */
void start_watch_end(start_watch *w);

#endif
