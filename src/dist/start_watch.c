/* The start-up watchdog (start_watch.h): a thread asleep on a condition until the start-up completes or its
 * deadline passes. It ends the process with _exit after a write(2): the main thread is inside MPI, which may hold
 * locks that exit handlers or MPI_Abort would need. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "dist/start_watch.h"

static _Noreturn void start_timed_out(const start_watch *w) {
    char line[640];
    int n = snprintf(line, sizeof line, "snug: %s: the start-up of the MPI job did not complete within the rank "
                     "timeout of %g s: %s; check that every rank of the job is running (one may be stopped, hung, or "
                     "was never started), or raise the rank timeout; ending the job\n", w->who, w->timeout_s,
                     w->step);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    for (const char *p = line; len > 0;) {
        ssize_t put = write(STDERR_FILENO, p, len);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) break;
        p += put, len -= (size_t)put;
    }
    _exit(1);
}

static void *watch(void *arg) {
    start_watch *w = arg;
    pthread_mutex_lock(&w->lock);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&w->wake, &w->lock, &w->deadline);
    if (!w->done) start_timed_out(w); /* holding the lock: who and step stay as they are */
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void set_who(start_watch *w, const char *who) {
    if (who) snprintf(w->who, sizeof w->who, "%s", who);
}

snug_status start_watch_begin(start_watch *w, double timeout_s, const char *who, const char *step, snug_error *err) {
    *w = (start_watch){.timeout_s = timeout_s, .step = step};
    set_who(w, who);
    if (!(timeout_s > 0)) return SNUG_OK;
    clock_gettime(CLOCK_MONOTONIC, &w->deadline);
    const double whole = (double)(time_t)timeout_s;
    w->deadline.tv_sec += (time_t)timeout_s;
    w->deadline.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (w->deadline.tv_nsec >= 1000000000L) w->deadline.tv_sec++, w->deadline.tv_nsec -= 1000000000L;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, &attr);
    pthread_condattr_destroy(&attr);
    int rc = pthread_create(&w->thread, NULL, watch, w);
    if (rc != 0) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        return snug_fail(err, SNUG_E_IO, "%s: cannot start the thread that bounds the start-up of the MPI job: %s",
                         w->who, strerror(rc));
    }
    w->running = true;
    return SNUG_OK;
}

void start_watch_at(start_watch *w, const char *who, const char *step) {
    if (w->running) pthread_mutex_lock(&w->lock);
    set_who(w, who);
    w->step = step;
    if (w->running) pthread_mutex_unlock(&w->lock);
}

void start_watch_end(start_watch *w) {
    if (!w->running) return;
    pthread_mutex_lock(&w->lock);
    w->done = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    w->running = false;
}
