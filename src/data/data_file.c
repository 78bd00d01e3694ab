/* Data files read with pread (data/data_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "data/data_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

static snug_status check_file(int fd, const char *path, const char *expected, size_t min_len, size_t *len,
                              snug_error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0) return snug_fail(err, SNUG_E_IO, "cannot stat %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return snug_fail(err, SNUG_E_IO, "%s is a directory, expected %s", path, expected);
    if (!S_ISREG(st.st_mode))
        return snug_fail(err, SNUG_E_IO, "%s is not a regular file, expected %s", path, expected);
    if (st.st_size == 0) return snug_fail(err, SNUG_E_FORMAT, "%s is empty (0 bytes), expected %s", path, expected);
    if ((uintmax_t)st.st_size > SIZE_MAX / 2)
        return snug_fail(err, SNUG_E_FORMAT, "%s is too large (%jd bytes)", path, (intmax_t)st.st_size);
    if ((size_t)st.st_size < min_len)
        return snug_fail(err, SNUG_E_FORMAT, "%s: truncated: %jd bytes, %s has at least %zu", path,
                         (intmax_t)st.st_size, expected, min_len);
    *len = (size_t)st.st_size;
    return SNUG_OK;
}

snug_status data_file_open(const char *path, const char *expected, const char *missing, size_t min_len,
                           data_file *f, snug_error *err) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    /* O_NONBLOCK: a FIFO given by mistake must fail below, not hang here; regular files ignore it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && missing) return snug_fail(err, SNUG_E_IO, "cannot open %s: no such file %s", path, missing);
        return snug_fail(err, SNUG_E_IO, "cannot open %s: %s", path, strerror(e));
    }
    size_t len = 0;
    snug_status s = check_file(fd, path, expected, min_len, &len, err);
    if (s == SNUG_OK && !(f->path = strdup(path))) s = snug_fail(err, SNUG_E_OOM, "out of memory opening %s", path);
    if (s != SNUG_OK) {
        close(fd);
        return s;
    }
    f->fd = fd;
    f->len = len;
    return SNUG_OK;
}

bool data_file_read(data_file *f, size_t offset, void *buf, size_t len) {
    size_t done = 0;
    int e = 0;
    while (done < len) {
        ssize_t r = pread(f->fd, (char *)buf + done, len - done, (off_t)(offset + done));
        if (r > 0) done += (size_t)r;
        else if (r < 0 && errno == EINTR) continue;
        else {
            e = r == 0 ? EIO : errno; /* 0: the file is shorter than when it was opened */
            break;
        }
    }
    if (done == len) return true;
    memset(buf, 0, len);
    int none = 0;
    if (atomic_compare_exchange_strong(&f->failed, &none, e)) atomic_store(&f->failed_at, offset);
    return false;
}

snug_status data_file_status(const data_file *f, snug_error *err) {
    const int e = atomic_load(&f->failed);
    if (!e) return SNUG_OK;
    const size_t at = atomic_load(&f->failed_at);
    if (e == EIO)
        return snug_fail(err, SNUG_E_IO, "cannot read %s at byte %zu: the file changed or its disk failed since "
                         "it was opened (%zu bytes then): %s", f->path, at, f->len, strerror(e));
    return snug_fail(err, SNUG_E_IO, "cannot read %s at byte %zu: %s", f->path, at, strerror(e));
}

void data_file_close(data_file *f) {
    if (!f) return;
    if (f->fd >= 0 && f->path) close(f->fd);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}
