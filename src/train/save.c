/* Saving the parameters: "SNUGPAR1", the element count (uint64, little-endian), then the float32 values
 * (little-endian) in graph order, the layout of the parameter block itself. Written atomically (a temporary
 * file, fsync, rename), so a crash or a full disk never leaves a half-written file under the final name.
 * A deliberately small format: the model zoo will bring named tensors (safetensors). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "train/trainer.h"

#define SAVE_MAGIC "SNUGPAR1"

static void put_u64_le(unsigned char out[8], uint64_t v) {
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(v >> (8 * i));
}

/* The values as little-endian bytes whatever the host's byte order, in chunks through a small buffer. */
static bool write_floats_le(FILE *f, const float *v, size_t n) {
    unsigned char buf[4096];
    for (size_t done = 0; done < n;) {
        size_t chunk = n - done < sizeof buf / 4 ? n - done : sizeof buf / 4;
        for (size_t i = 0; i < chunk; i++) {
            uint32_t bits;
            memcpy(&bits, &v[done + i], sizeof bits);
            for (int b = 0; b < 4; b++) buf[4 * i + (size_t)b] = (unsigned char)(bits >> (8 * b));
        }
        if (fwrite(buf, 4, chunk, f) != chunk) return false;
        done += chunk;
    }
    return true;
}

/* Writes the whole file and forces it to disk; false with errno set on any failure. */
static bool write_file(FILE *f, const float *params, size_t n) {
    unsigned char count[8];
    put_u64_le(count, (uint64_t)n);
    if (fwrite(SAVE_MAGIC, 1, 8, f) != 8 || fwrite(count, 1, 8, f) != 8) return false;
    if (!write_floats_le(f, params, n)) return false;
    return fflush(f) == 0 && fsync(fileno(f)) == 0;
}

/* Closes f and moves tmp to path; 0, or the errno of the first step that failed. */
static int finish_file(FILE *f, bool written, int write_errno, const char *tmp, const char *path) {
    int e = written ? 0 : write_errno;
    if (fclose(f) != 0 && e == 0) e = errno;
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    return e;
}

snug_status snug_trainer_save(const snug_trainer *tr, const char *path, snug_error *err) {
    size_t len = strlen(path) + sizeof ".tmp";
    char *tmp = malloc(len);
    if (!tmp) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused a file name");
    snprintf(tmp, len, "%s.tmp", path);
    snug_status s = SNUG_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        s = snug_fail(err, SNUG_E_IO, "cannot create '%s': %s; check that its folder exists and is writable", tmp,
                      strerror(errno));
    } else {
        errno = 0;
        bool written = write_file(f, tr->x.params, tr->g->param_numel);
        int e = finish_file(f, written, errno ? errno : EIO, tmp, path);
        if (e != 0) {
            s = snug_fail(err, SNUG_E_IO, "cannot write the parameters to '%s': %s (is the disk full?); an "
                          "existing '%s' is left as it was", path, strerror(e), path);
            remove(tmp);
        }
    }
    free(tmp);
    return s;
}
