/* bench_cache_pair: how far apart two threads' caches are, right now. Two threads (pinned to the first two
 * processors this process may use) hand a cache line back and forth; the round trip is ~50 ns where both cores
 * share a last-level cache and several times that where they do not (two chiplets of an AMD EPYC, two
 * sockets, or a virtual machine whose host placed its two vCPUs apart; on the machine of docs/performance.md
 * 55 against 340 ns, and the placement flips within minutes). Where the threads' caches are apart, every line
 * one thread wrote and the other touches crosses between them, so a run's speed depends on it:
 * bench/compare.py records it before and after every process it times.
 *
 *   bench_cache_pair [round trips]      prints "round_trip_ns N" (the median of 5 batches)
 *
 * Exit status 0, or 2 on bad arguments, or 1 where fewer than two processors are available (nothing to
 * measure). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCHES 5

typedef struct pair {
    _Alignas(64) atomic_long turn; /* odd: the other thread's move; the line that travels */
    long trips;
    int cpu;
} pair;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The other thread: answers each odd turn with the next even one, BATCHES x trips times. */
static void *answer(void *arg) {
    pair *p = arg;
    pin(p->cpu);
    for (long i = 0; i < BATCHES * p->trips; i++) {
        while (atomic_load_explicit(&p->turn, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&p->turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    char *end = NULL;
    const long trips = argc > 1 ? strtol(argv[1], &end, 10) : 20000;
    if (argc > 2 || (argc > 1 && (*end != '\0' || trips < 1 || trips > 100000000))) {
        fprintf(stderr, "usage: bench_cache_pair [round trips, 1..100000000; default 20000]\n");
        return 2;
    }
    cpu_set_t allowed;
    int cpus[2], n = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
    if (n < 2) {
        fprintf(stderr, "bench_cache_pair: fewer than two processors available; nothing to measure\n");
        return 1;
    }
    static pair p;
    p.trips = trips;
    p.cpu = cpus[1];
    atomic_store(&p.turn, 0);
    pin(cpus[0]);
    pthread_t other;
    if (pthread_create(&other, NULL, answer, &p) != 0) {
        fprintf(stderr, "bench_cache_pair: cannot start a second thread\n");
        return 1;
    }
    double ns[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        const double t0 = now_ns();
        for (long i = b * trips; i < (b + 1) * trips; i++) {
            atomic_store_explicit(&p.turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&p.turn, memory_order_acquire) != 2 * i + 2) {
            }
        }
        ns[b] = (now_ns() - t0) / (double)trips;
    }
    pthread_join(other, NULL);
    qsort(ns, BATCHES, sizeof ns[0], by_value);
    printf("round_trip_ns %.1f\n", ns[BATCHES / 2]);
    return 0;
}
