/* atomic_file_write (atomic_file.h): fopen, fill, fflush, fsync, fclose, rename, then the folder opened and
 * fsync'ed; the first failure stops the sequence and removes the temporary file. */
#define _POSIX_C_SOURCE 200809L
#include "core/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* The folder of path synced, so that a rename into it survives a power cut; 0 or the errno of the failure. */
static int sync_folder(const char *path) {
    char *copy = strdup(path);
    if (!copy) return ENOMEM;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    int e = fd < 0 || fsync(fd) != 0 ? errno : 0;
    if (fd >= 0) close(fd);
    free(copy);
    return e;
}

/* The content into the open temporary file, flushed and synced; 0, or the errno of a failed write (*s stays OK),
 * or -1 when fill reported its own failure in err (*s holds it). The file is closed in every case. */
static int fill_and_sync(FILE *f, atomic_file_fill fill, void *user, snug_status *s, snug_error *err) {
    errno = 0;
    *s = fill(f, user, err);
    int e = 0;
    if (*s == SNUG_OK && (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)) e = errno ? errno : EIO;
    if (fclose(f) != 0 && *s == SNUG_OK && e == 0) e = errno ? errno : EIO;
    return *s != SNUG_OK ? -1 : e;
}

snug_status atomic_file_write(const char *path, const char *tmp, const char *what, atomic_file_fill fill, void *user,
                              snug_error *err) {
    char *own = NULL;
    if (!tmp) {
        const size_t n = strlen(path) + sizeof ".tmp";
        if (!(own = malloc(n))) return snug_fail(err, SNUG_E_OOM, "%s '%s': no memory for the file name", what, path);
        snprintf(own, n, "%s.tmp", path);
        tmp = own;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snug_status s = snug_fail(err, SNUG_E_IO, "cannot create the %s '%s': %s; check that its folder exists and "
                                  "is writable", what, tmp, strerror(errno));
        free(own);
        return s;
    }
    snug_status s;
    int e = fill_and_sync(f, fill, user, &s, err);
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    if (e == 0 && (e = sync_folder(path)) != 0) /* renamed: the new file is in place, perhaps not yet durable */
        s = snug_fail(err, SNUG_E_IO, "the %s '%s' is written but its folder could not be synced: %s; a power cut "
                      "now may lose it", what, path, strerror(e));
    else if (e > 0) {
        struct stat st;
        s = snug_fail(err, SNUG_E_IO, "cannot write the %s '%s': %s (is the disk full?)", what, path, strerror(e));
        if (stat(path, &st) == 0) snug_error_append(err, "; the existing '%s' is left as it was", path);
    }
    if (s != SNUG_OK) remove(tmp);
    free(own);
    return s;
}
