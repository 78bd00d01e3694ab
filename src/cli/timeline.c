/* Choosing the timeline's format by extension, and writing the file atomically: the picture or table goes to
 * PATH.tmp, is flushed to disk, then renamed over PATH, so an interrupted run never leaves half a file behind
 * under the name a reader asked for. */
#define _POSIX_C_SOURCE 200809L
#include "cli/timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/error.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcasecmp(s + n - k, suffix) == 0;
}

cli_timeline_format cli_timeline_format_of(const char *path) {
    if (!path) return CLI_TIMELINE_UNKNOWN;
    if (ends_with(path, ".svg")) return CLI_TIMELINE_SVG;
    if (ends_with(path, ".csv")) return CLI_TIMELINE_CSV;
    return CLI_TIMELINE_UNKNOWN;
}

/* Writes the content, flushes it and syncs it; on failure returns errno of the first failing call. */
static int write_synced(const cli_timeline *t, cli_timeline_format format, FILE *f) {
    int rc = format == CLI_TIMELINE_SVG ? cli_timeline_svg(t, f) : cli_timeline_csv(t, f);
    if (rc != 0 || fflush(f) != 0 || ferror(f)) return errno ? errno : EIO;
    if (fsync(fileno(f)) != 0) return errno;
    return 0;
}

snug_status cli_timeline_write(const cli_timeline *t, const char *path, snug_error *err) {
    cli_timeline_format format = cli_timeline_format_of(path);
    if (format == CLI_TIMELINE_UNKNOWN)
        return snug_fail(err, SNUG_E_ARG, "timeline '%s': the name must end in .svg or .csv", path);
    size_t n = strlen(path) + sizeof ".tmp";
    char *tmp = malloc(n);
    if (!tmp) return snug_fail(err, SNUG_E_OOM, "timeline '%s': no memory for the file name", path);
    snprintf(tmp, n, "%s.tmp", path);

    errno = 0;
    FILE *f = fopen(tmp, "w");
    int e = f ? write_synced(t, format, f) : errno;
    if (f && fclose(f) != 0 && e == 0) e = errno ? errno : EIO;
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    snug_status st = SNUG_OK;
    if (e != 0) {
        st = snug_fail(err, SNUG_E_IO, "cannot write the timeline '%s': %s (check that its folder exists and is "
                       "writable)", path, strerror(e));
        remove(tmp);
    }
    free(tmp);
    return st;
}
