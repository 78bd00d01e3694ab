/* The read-ahead thread (prefetch.h). One reader per epoch: started after the epoch's order is drawn, stopped
 * before the next one is, so the order it reads from never changes under it. Slots are filled and emptied in
 * sequence; produced - consumed is how many are full. The reader holds no lock while it decodes, only the
 * trainer's data lock (train/read.c) around the data set's own calls. */
#define _POSIX_C_SOURCE 200809L
#include "train/prefetch.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/dataset.h"
#include "train/read.h"
#include "train/trainer.h"

typedef struct slot_meta {
    const size_t *idx; /* the micro-batch's first sample in the epoch's order */
    size_t n;
} slot_meta;

struct prefetch {
    snug_trainer *tr;
    float *inputs;
    int32_t *targets;
    size_t slots, input_numel, target_numel; /* per slot: a micro-batch of the plan */
    slot_meta *meta;
    int threads;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t thread;
    bool running, stop, done;
    size_t produced, consumed;
    /* the epoch being read */
    const snug_dataset *ds;
    const size_t *order;
    size_t n;
    long epoch, w0, per_epoch;
    double busy_seconds;
    size_t samples;
};

/* Waits for a free slot; false when asked to stop. */
static bool wait_for_room(prefetch *pf) {
    pthread_mutex_lock(&pf->lock);
    while (!pf->stop && pf->produced - pf->consumed >= pf->slots) pthread_cond_wait(&pf->changed, &pf->lock);
    const bool go = !pf->stop;
    pthread_mutex_unlock(&pf->lock);
    return go;
}

static bool read_one(prefetch *pf, const size_t *idx, size_t n) {
    if (!wait_for_room(pf)) return false;
    const size_t s = pf->produced % pf->slots; /* only this thread moves produced */
    const double t0 = omp_get_wtime();
    trainer_read_training(pf->tr, pf->ds, idx, n, pf->epoch, pf->inputs + s * pf->input_numel,
                          pf->targets + s * pf->target_numel);
    pthread_mutex_lock(&pf->lock);
    pf->busy_seconds += omp_get_wtime() - t0;
    pf->samples += n;
    pf->meta[s] = (slot_meta){idx, n};
    pf->produced++;
    pthread_cond_broadcast(&pf->changed);
    pthread_mutex_unlock(&pf->lock);
    return true;
}

/* The micro-batches run_shard (accumulate.c) takes, in its order: every window's shard for this rank, cut in m. */
static void *reader(void *arg) {
    prefetch *pf = arg;
    const snug_trainer *tr = pf->tr;
    const size_t B = tr->batch, m = tr->plan->m;
    omp_set_num_threads(pf->threads); /* this thread's own team, beside the step's */
    bool go = true;
    for (long w = pf->w0; w < pf->per_epoch && go; w++) {
        const size_t start = (size_t)w * B, len = pf->n - start < B ? pf->n - start : B;
        size_t begin, share;
        dist_shard(len, tr->dist.rank, tr->dist.size, &begin, &share);
        for (size_t s = 0; s < share && go; s += m)
            go = read_one(pf, pf->order + start + begin + s, share - s < m ? share - s : m);
    }
    pthread_mutex_lock(&pf->lock);
    pf->done = true;
    pthread_cond_broadcast(&pf->changed);
    pthread_mutex_unlock(&pf->lock);
    return NULL;
}

snug_status prefetch_new(snug_trainer *tr, snug_error *err) {
    const plan *p = tr->plan;
    prefetch *pf = calloc(1, sizeof *pf);
    slot_meta *meta = calloc(p->ring_slots, sizeof *meta);
    bool locks = pf && meta && pthread_mutex_init(&pf->lock, NULL) == 0;
    if (locks && pthread_mutex_init(&tr->data_lock, NULL) != 0) pthread_mutex_destroy(&pf->lock), locks = false;
    if (!locks) {
        free(pf);
        free(meta);
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the read-ahead thread's state");
    }
    pthread_cond_init(&pf->changed, NULL);
    pf->tr = tr, pf->inputs = tr->x.ring_inputs, pf->targets = tr->x.ring_targets, pf->slots = p->ring_slots;
    pf->meta = meta;
    pf->threads = p->ring_threads > 0 ? p->ring_threads : 1;
    pf->input_numel = p->input_bytes / sizeof(float); /* a slot's stride: the planned buffer's */
    pf->target_numel = p->targets_bytes / sizeof(int32_t);
    tr->pf = pf;
    return SNUG_OK;
}

void prefetch_free(snug_trainer *tr) {
    prefetch *pf = tr->pf;
    if (!pf) return;
    prefetch_stop(pf);
    tr->read_ahead_s += pf->busy_seconds;
    tr->read_ahead_samples += pf->samples;
    tr->pf = NULL;
    pthread_mutex_destroy(&tr->data_lock);
    pthread_cond_destroy(&pf->changed);
    pthread_mutex_destroy(&pf->lock);
    free(pf->meta);
    free(pf);
}

snug_status prefetch_start(prefetch *pf, const snug_dataset *ds, const size_t *order, size_t n, long epoch, long w0,
                           long per_epoch, snug_error *err) {
    prefetch_stop(pf);
    pf->ds = ds, pf->order = order, pf->n = n, pf->epoch = epoch, pf->w0 = w0, pf->per_epoch = per_epoch;
    pf->produced = pf->consumed = 0;
    pf->stop = pf->done = false;
    if (pthread_create(&pf->thread, NULL, reader, pf) != 0)
        return snug_fail(err, SNUG_E_OOM, "the system refused the read-ahead thread");
    pf->running = true;
    return SNUG_OK;
}

void prefetch_stop(prefetch *pf) {
    if (!pf->running) return;
    pthread_mutex_lock(&pf->lock);
    pf->stop = true;
    pthread_cond_broadcast(&pf->changed);
    pthread_mutex_unlock(&pf->lock);
    pthread_join(pf->thread, NULL);
    pf->running = false;
}

bool prefetch_take(prefetch *pf, const size_t *idx, size_t n, float *x, int32_t *y) {
    if (!pf->running) return false;
    pthread_mutex_lock(&pf->lock);
    for (;;) {
        while (pf->produced == pf->consumed && !pf->done) pthread_cond_wait(&pf->changed, &pf->lock);
        if (pf->produced == pf->consumed) break; /* the reader ended before this micro-batch */
        const slot_meta *s = &pf->meta[pf->consumed % pf->slots];
        if (s->idx >= idx) break;
        pf->consumed++; /* one the step skipped: make room */
        pthread_cond_broadcast(&pf->changed);
    }
    const bool have = pf->produced != pf->consumed && pf->meta[pf->consumed % pf->slots].idx == idx &&
                      pf->meta[pf->consumed % pf->slots].n == n;
    const size_t s = pf->consumed % pf->slots;
    pthread_mutex_unlock(&pf->lock);
    if (!have) return false;
    memcpy(x, pf->inputs + s * pf->input_numel, n * pf->ds->sample_numel * sizeof *x);
    memcpy(y, pf->targets + s * pf->target_numel, n * pf->ds->targets_per_sample * sizeof *y);
    pthread_mutex_lock(&pf->lock);
    pf->consumed++;
    pthread_cond_broadcast(&pf->changed);
    pthread_mutex_unlock(&pf->lock);
    return true;
}

void prefetch_counts(prefetch *pf, double *busy_seconds, size_t *samples) {
    pthread_mutex_lock(&pf->lock);
    *busy_seconds = pf->busy_seconds;
    *samples = pf->samples;
    pthread_mutex_unlock(&pf->lock);
}
