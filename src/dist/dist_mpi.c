/* The job over MPI: MPI_COMM_WORLD's ranks, in-place all-reduces and broadcasts. Compiled when CMake finds MPI
 * (SNUG_WITH_MPI). MPI is initialised only when a launcher started the process (mpirun, srun), so a plain
 * `snug train` neither starts Open MPI's runtime nor prints anything of it: it is a job of one rank.
 *
 * Every collective is started non-blocking and polled against its deadline (dist.h): a blocking MPI call would
 * wait forever for a rank that was stopped or lost. Beside it, every rank sends every other a one-byte note on
 * arrival, so that a rank whose collective times out can tell who never came.
 *
 * MPI_Init and the MPI_Comm_dup after it cannot be polled: a thread bounds them by the same timeout
 * (start_watch.h).
 *
 * The job state below is the library's one global besides the thread pool: MPI itself is process-wide. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "dist/dist.h"
#include "dist/start_watch.h"

static struct {
    bool joined;       /* MPI is initialised and this process is a rank of the job */
    bool we_init;      /* dist_init called MPI_Init (else the host program did): only then finalize */
    dist self;
    MPI_Comm notes;    /* the arrival notes' own communicator (a duplicate of MPI_COMM_WORLD), in a job of many */
    MPI_Request *note_req; /* the notes of the collective in flight: the receive from rank r at [r], the send to
                              it at [size + r]; MPI_REQUEST_NULL at this rank's own */
    char *note_in;     /* a received note per rank */
    bool tool;         /* MPI's tool interface is initialised (for ring_knob) */
    bool has_ring_knob;
    MPI_T_cvar_handle ring_knob;
} job = {.self = {.rank = 0, .size = 1}, .notes = MPI_COMM_NULL};

#if SIZE_MAX == ULONG_MAX
#define MPI_SIZE_T MPI_UNSIGNED_LONG
#elif SIZE_MAX == ULLONG_MAX
#define MPI_SIZE_T MPI_UNSIGNED_LONG_LONG
#else
#error "no MPI datatype matches size_t"
#endif

/* Launchers announce the job in the environment: Open MPI's mpirun, PMIx (srun --mpi=pmix, prterun), and the
 * PMI of MPICH's Hydra and of Slurm. */
static bool launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

static snug_status mpi_fail(int rc, const char *what, snug_error *err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", rc);
    return snug_fail(err, SNUG_E_IO, "rank %d of %d: %s failed: %s", job.self.rank, job.self.size, what, text);
}

dist dist_get(void) { return job.self; }

bool dist_joined(void) { return job.joined; }

/* The arrival notes of a job of several ranks: a communicator of their own, and a request and a byte per rank. */
static snug_status notes_init(snug_error *err) {
    const size_t size = (size_t)job.self.size;
    if (size == 1) return SNUG_OK;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &job.notes);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_dup", err);
    job.note_req = malloc(2 * size * sizeof *job.note_req);
    job.note_in = malloc(size);
    if (!job.note_req || !job.note_in)
        return snug_fail(err, SNUG_E_OOM, "rank %d of %zu: out of memory for %zu arrival notes", job.self.rank,
                         size, size);
    return SNUG_OK;
}

/* Open MPI's non-blocking all-reduce (libnbc) chooses a binomial tree for every in-place call over fewer than 4
 * ranks, which takes the whole block to rank 0 and back: 1.7x the time of the blocking all-reduce for the mlp's
 * 7 MiB of gradients over 2 ranks, where its ring algorithm takes the same time. A large all-reduce asks for the
 * ring through the MPI tool interface, for that call only; another MPI has no such knob, and nothing changes. */
#define RING_FROM_BYTES 65536
#define RING_ALGORITHM 1

static void find_ring_knob(void) {
    int provided, index, count;
    job.tool = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS;
    job.has_ring_knob = job.tool &&
                        MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
                        MPI_T_cvar_handle_alloc(index, NULL, &job.ring_knob, &count) == MPI_SUCCESS && count == 1;
}

/* Starts an in-place all-reduce of count elements, as a ring when it is large and the knob exists. */
static int start_allreduce(void *buf, int count, size_t elem, MPI_Datatype type, MPI_Op op, MPI_Request *req) {
    int before = 0, ring = RING_ALGORITHM;
    const bool pick = job.has_ring_knob && (size_t)count * elem >= RING_FROM_BYTES &&
                      MPI_T_cvar_read(job.ring_knob, &before) == MPI_SUCCESS &&
                      MPI_T_cvar_write(job.ring_knob, &ring) == MPI_SUCCESS;
    const int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, op, MPI_COMM_WORLD, req);
    if (pick) MPI_T_cvar_write(job.ring_knob, &before); /* the algorithm is chosen when the call starts */
    return rc;
}

/* The rank the launcher gave this process, before MPI_Init can tell (NULL: not said). */
static const char *launcher_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    const char *rank = NULL;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0] && !rank; i++) rank = getenv(vars[i]);
    return rank;
}

/* "rank 1 of 2 (pid 4242 on node3)", or "pid 4242 on node3" while the rank is not known. */
static void name_process(char *buf, size_t len, const char *rank) {
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    if (rank) snprintf(buf, len, "rank %.24s (pid %ld on %s)", rank, (long)getpid(), host);
    else snprintf(buf, len, "pid %ld on %s", (long)getpid(), host);
}

static snug_status join(int *argc, char ***argv, bool ready, start_watch *watch, snug_error *err) {
    if (!ready) {
        int rc = MPI_Init(argc, argv);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init", err);
        job.we_init = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &job.self.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &job.self.size);
    job.joined = true;
    char rank[32], who[START_WATCH_WHO_MAX];
    snprintf(rank, sizeof rank, "%d of %d", job.self.rank, job.self.size);
    name_process(who, sizeof who, rank);
    start_watch_at(watch, who, "the set-up of its communicator (MPI_Comm_dup, which every rank must reach) is "
                   "still waiting for another rank");
    find_ring_knob();
    return notes_init(err);
}

snug_status dist_init(int *argc, char ***argv, double timeout_s, snug_error *err) {
    if (job.joined) return SNUG_OK;
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready && !launched_by_mpi()) return SNUG_OK;
    char who[START_WATCH_WHO_MAX];
    name_process(who, sizeof who, launcher_rank());
    start_watch watch;
    snug_status s = start_watch_begin(&watch, timeout_s, who, "MPI_Init is still waiting for the launcher or for "
                                      "another rank to start", err);
    if (s == SNUG_OK) s = join(argc, argv, ready != 0, &watch, err);
    start_watch_end(&watch);
    return s;
}

void dist_finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (job.notes != MPI_COMM_NULL && !done) MPI_Comm_free(&job.notes);
    free(job.note_req);
    free(job.note_in);
    job.note_req = NULL, job.note_in = NULL, job.notes = MPI_COMM_NULL;
    if (job.has_ring_knob && !done) MPI_T_cvar_handle_free(&job.ring_knob);
    if (job.tool) MPI_T_finalize();
    job.tool = job.has_ring_knob = false;
    if (job.joined && job.we_init && !done) MPI_Finalize();
    job.joined = job.we_init = false;
    job.self = (dist){.rank = 0, .size = 1};
}

_Noreturn void dist_abort(const char *message) {
    fflush(stdout);
    if (message) fprintf(stderr, "%s\n", message);
    fflush(stderr);
    if (job.joined) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* A collective over one rank is the identity: no MPI call at all. */
static bool alone(void) { return !job.joined || job.self.size == 1; }

/* One collective in flight: when it must be done by, and what it is, for the message that ends a job stuck in
 * it. */
typedef struct collective {
    const char *what;  /* "an all-reduce" */
    double timeout_s;  /* 0: none */
    double deadline;   /* MPI_Wtime() */
} collective;

#define NOTE_TAG 7
#define NAMED_MAX 8    /* late ranks named in a message; more are counted */

/* Before it takes part, a rank sends every other a note that it has reached this collective. Notes between two
 * ranks arrive in the order sent (MPI's non-overtaking rule), so the note received now from rank r is r's for
 * this collective, whatever r's pace. */
static collective collective_begin(const char *what, double timeout_s) {
    static const char note = 1;
    const int me = job.self.rank, size = job.self.size;
    for (int r = 0; r < size; r++) {
        job.note_req[r] = job.note_req[size + r] = MPI_REQUEST_NULL;
        if (r == me) continue;
        MPI_Irecv(&job.note_in[r], 1, MPI_CHAR, r, NOTE_TAG, job.notes, &job.note_req[r]);
        MPI_Isend(&note, 1, MPI_CHAR, r, NOTE_TAG, job.notes, &job.note_req[size + r]);
    }
    return (collective){.what = what, .timeout_s = timeout_s, .deadline = MPI_Wtime() + timeout_s};
}

/* "rank 1", "ranks 1 and 3", "ranks 1, 3, 5, 6, 7, 8, 9, 10 and 4 more" */
static void format_ranks(const int *named, int n, char *buf, size_t len) {
    const int shown = n < NAMED_MAX ? n : NAMED_MAX;
    int w = snprintf(buf, len, "rank%s", n == 1 ? "" : "s");
    for (int i = 0; i < shown && w >= 0 && (size_t)w < len; i++)
        w += snprintf(buf + w, len - (size_t)w, "%s%d", i == 0 ? " " : i == n - 1 ? " and " : ", ", named[i]);
    if (n > shown && w >= 0 && (size_t)w < len) snprintf(buf + w, len - (size_t)w, " and %d more", n - shown);
}

static void sleep_seconds(double s) {
    struct timespec t = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0) {}
}

/* Past the deadline: the notes that have not come name the ranks that never reached the collective. The lowest
 * rank that did reach it says so and ends the job. The others give it a while for that (the ranks' deadlines
 * part by how far apart they arrived), one after another, and speak only if they are still alive then: the
 * rank that should have spoken may be the one that hangs. */
#define GRACE_MAX_S 10.0

static _Noreturn void timed_out(const collective *c) {
    const int me = job.self.rank, size = job.self.size;
    int named[NAMED_MAX], late = 0, before_me = 0;
    for (int r = 0; r < size; r++) {
        int arrived = 1;
        if (r != me) MPI_Test(&job.note_req[r], &arrived, MPI_STATUS_IGNORE);
        if (!arrived && late < NAMED_MAX) named[late] = r;
        late += !arrived;
        before_me += arrived && r < me;
    }
    char who[160], line[512];
    format_ranks(named, late, who, sizeof who);
    if (late > 0)
        snprintf(line, sizeof line, "snug: rank %d: %s of %d did not reach %s within the rank timeout of %g s "
                 "(stopped, hung, cut off, or far slower than the others); ending the job", me, who, size, c->what,
                 c->timeout_s);
    else
        snprintf(line, sizeof line, "snug: rank %d: every rank reached %s, but it did not complete within the rank "
                 "timeout of %g s (a rank stopped or hung inside it, or the network failed); ending the job", me,
                 c->what, c->timeout_s);
    sleep_seconds(before_me * (c->timeout_s < GRACE_MAX_S ? c->timeout_s : GRACE_MAX_S));
    dist_abort(line);
}

/* Polls the requests until all are done; past the collective's deadline, ends the job. */
static void await(const collective *c, MPI_Request *reqs, int n) {
    for (;;) {
        int done = 0;
        MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (done) return;
        if (c->timeout_s > 0 && MPI_Wtime() > c->deadline) timed_out(c);
    }
}

/* The notes of every rank, here once the collective is done on this rank (every rank sent its note before it
 * took part), and this rank's own notes delivered. */
static void collective_end(const collective *c) { await(c, job.note_req, 2 * job.self.size); }

/* MPI counts are int: a longer buffer is reduced in slices of at most INT_MAX elements, within one deadline. */
static snug_status allreduce(void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op, double timeout_s,
                             snug_error *err) {
    if (alone()) return SNUG_OK;
    const collective c = collective_begin("an all-reduce", timeout_s);
    for (size_t done = 0; done < n;) {
        int count = n - done > (size_t)INT_MAX ? INT_MAX : (int)(n - done);
        MPI_Request req;
        int rc = start_allreduce((char *)buf + done * elem, count, elem, type, op, &req);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Iallreduce", err);
        await(&c, &req, 1);
        done += (size_t)count;
    }
    collective_end(&c);
    return SNUG_OK;
}

snug_status dist_allreduce_floats(float *buf, size_t n, double timeout_s, snug_error *err) {
    return allreduce(buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, timeout_s, err);
}

snug_status dist_allreduce_doubles(double *buf, size_t n, double timeout_s, snug_error *err) {
    return allreduce(buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM, timeout_s, err);
}

snug_status dist_allreduce_sizes(size_t *buf, size_t n, dist_op op, double timeout_s, snug_error *err) {
    return allreduce(buf, n, sizeof *buf, MPI_SIZE_T, op == DIST_MAX ? MPI_MAX : MPI_SUM, timeout_s, err);
}

snug_status dist_broadcast_floats(float *buf, size_t n, double timeout_s, snug_error *err) {
    if (alone()) return SNUG_OK;
    const collective c = collective_begin("a broadcast", timeout_s);
    for (size_t done = 0; done < n;) {
        int count = n - done > (size_t)INT_MAX ? INT_MAX : (int)(n - done);
        MPI_Request req;
        int rc = MPI_Ibcast(buf + done, count, MPI_FLOAT, 0, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Ibcast", err);
        await(&c, &req, 1);
        done += (size_t)count;
    }
    collective_end(&c);
    return SNUG_OK;
}
