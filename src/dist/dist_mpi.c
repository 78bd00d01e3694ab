/* The job over MPI: MPI_COMM_WORLD's ranks, in-place all-reduces and broadcasts. Compiled when CMake finds MPI
 * (SNUG_WITH_MPI). MPI is initialised only when a launcher started the process (mpirun, srun), so a plain
 * `snug train` neither starts Open MPI's runtime nor prints anything of it: it is a job of one rank.
 *
 * The job state below is the library's one global besides the thread pool: MPI itself is process-wide. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "dist/dist.h"

static struct {
    bool joined;       /* MPI is initialised and this process is a rank of the job */
    bool we_init;      /* dist_init called MPI_Init (else the host program did): only then finalize */
    dist self;
} job = {.self = {.rank = 0, .size = 1}};

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

snug_status dist_init(int *argc, char ***argv, snug_error *err) {
    if (job.joined) return SNUG_OK;
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
        if (!launched_by_mpi()) return SNUG_OK;
        int rc = MPI_Init(argc, argv);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init", err);
        job.we_init = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &job.self.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &job.self.size);
    job.joined = true;
    return SNUG_OK;
}

void dist_finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
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

/* MPI counts are int: a longer buffer is reduced in slices of at most INT_MAX elements. */
static snug_status allreduce(void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op, snug_error *err) {
    if (alone()) return SNUG_OK;
    for (size_t done = 0; done < n;) {
        int count = n - done > (size_t)INT_MAX ? INT_MAX : (int)(n - done);
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * elem, count, type, op, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Allreduce", err);
        done += (size_t)count;
    }
    return SNUG_OK;
}

snug_status dist_allreduce_floats(float *buf, size_t n, snug_error *err) {
    return allreduce(buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, err);
}

snug_status dist_allreduce_doubles(double *buf, size_t n, snug_error *err) {
    return allreduce(buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM, err);
}

snug_status dist_allreduce_sizes(size_t *buf, size_t n, dist_op op, snug_error *err) {
    return allreduce(buf, n, sizeof *buf, MPI_SIZE_T, op == DIST_MAX ? MPI_MAX : MPI_SUM, err);
}

snug_status dist_broadcast_floats(float *buf, size_t n, snug_error *err) {
    if (alone()) return SNUG_OK;
    for (size_t done = 0; done < n;) {
        int count = n - done > (size_t)INT_MAX ? INT_MAX : (int)(n - done);
        int rc = MPI_Bcast(buf + done, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Bcast", err);
        done += (size_t)count;
    }
    return SNUG_OK;
}
