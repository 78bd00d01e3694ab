/* When splitting work over the OpenMP threads pays.
 *
 * Opening a team costs what waking its sleeping threads costs, and that depends on the runtime's wait policy far
 * more than on the work: about 1 us when the workers spin between regions (libgomp's default), 40-60 us when
 * they sleep (OMP_WAIT_POLICY=passive: on a 2-vCPU virtual machine every wake-up is an interprocessor interrupt
 * through the hypervisor). A pass of 100 us over 2 threads then takes 50 + 55 us: slower than serial. A fixed
 * size threshold is right for one policy and wrong for the other, so the cost of a team is measured once per
 * process and thread count (again every second: the load of a machine changes), and each op asks with an
 * estimate of its serial time.
 *
 * Only ops whose bits do not depend on the split use this (each output computed whole by one thread, or
 * partial sums over a partition fixed by the shape): choosing serial or parallel never changes a result. */
#ifndef SNUG_CORE_PARALLEL_H
#define SNUG_CORE_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>

/* Serial time estimates, one core of an AVX-512 machine; only their order of magnitude matters. */
#define PAR_NS_PER_FLOAT 0.1 /* one float read or written by a streaming pass over cache-resident data */
#define PAR_NS_PER_MAC 0.02   /* one multiply-add of a register-tiled product (about 100 GFLOP/s) */

/* Nanoseconds to open and close a team of all threads (back to back, as the ops of a step come): the median of
 * a few empty parallel regions, measured on first use for the current thread count and again when the last
 * measurement is a second old. 0 with one thread. */
double par_team_ns(void);

/* Whether work of about serial_ns nanoseconds on one thread should run on all of them: more than one thread,
 * not already inside a parallel region, and the work at least PAR_PAYBACK times the cost of the team (the
 * break-even is 2x: half the work saved against one team opened). */
bool par_pays(double serial_ns);

/* The same in the common units. */
static inline bool par_pays_floats(size_t floats) { return par_pays((double)floats * PAR_NS_PER_FLOAT); }
static inline bool par_pays_macs(size_t macs) { return par_pays((double)macs * PAR_NS_PER_MAC); }

#endif
