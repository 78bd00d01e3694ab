/* The measured cost of an OpenMP team (parallel.h). */
#define _POSIX_C_SOURCE 200809L
#include "core/parallel.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* Work must be this many times a team's cost before it is split: 2 is break-even on 2 threads, and an estimate
 * off by a few tens of percent should not turn a split into a loss. */
#define PAR_PAYBACK 3.0
#define PAR_WARMUP 3
#define PAR_SAMPLES 15
/* A measurement stops early once it has taken this long (a busy machine can make one region cost a whole
 * scheduler slice, 4-8 ms), and is taken again after PAR_REFRESH_NS: one unlucky moment must not decide the
 * threads of a whole run, and the machine's load changes. At most ~0.2% of the time goes to measuring. */
#define PAR_BUDGET_NS 2e6
#define PAR_REFRESH_NS 1e9

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int measured_threads; /* the thread count team_ns belongs to; 0: not measured */
static double team_ns, measured_at;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of empty regions opened back to back, after a few that wake the pool up (and, in a process's
 * first measurement, create it: milliseconds that are not the cost of a team, so they are never a sample);
 * fewer samples when they are slow (at least one). */
static double measure_team_ns(void) {
    double t[PAR_SAMPLES];
    volatile int sink = 0;
    for (int i = 0; i < PAR_WARMUP; i++) {
        #pragma omp parallel
        {
            if (omp_get_thread_num() == 0) sink = i;
        }
    }
    const double start = now_ns();
    int n = 0;
    while (n < PAR_SAMPLES) {
        const double t0 = now_ns();
        #pragma omp parallel
        {
            if (omp_get_thread_num() == 0) sink = n;
        }
        const double t1 = now_ns();
        t[n++] = t1 - t0;
        if (t1 - start > PAR_BUDGET_NS) break;
    }
    (void)sink;
    qsort(t, (size_t)n, sizeof t[0], by_value);
    return t[n / 2];
}

double par_team_ns(void) {
    const int threads = omp_get_max_threads();
    if (threads < 2) return 0.0;
    const double now = now_ns();
    pthread_mutex_lock(&lock);
    if (measured_threads != threads || now - measured_at > PAR_REFRESH_NS) {
        team_ns = measure_team_ns();
        measured_threads = threads;
        measured_at = now_ns();
    }
    const double ns = team_ns;
    pthread_mutex_unlock(&lock);
    return ns;
}

bool par_pays(double serial_ns) {
    if (omp_in_parallel() || omp_get_max_threads() < 2) return false;
    return serial_ns >= PAR_PAYBACK * par_team_ns();
}
