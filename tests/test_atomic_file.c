/* The one atomic file writer (core/atomic_file.h): a written file holds exactly what was written and no temporary
 * file stays beside it; a write that fails (the filler's own failure, or the file system refusing bytes past a
 * size limit) leaves the old file as it was and no temporary file behind; a folder that is missing or cannot be
 * written to is a clear SNUG_E_IO naming the file. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "snug.h"

static char dir[64];

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/snug-atomic-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[192];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *in_dir(const char *name) {
    static char paths[4][256];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1 << 20, 1);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The names in dir, but "." and "..", as one line: "a b c". */
static void listing(char *buf, size_t len) {
    buf[0] = '\0';
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        const size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", used ? " " : "", e->d_name);
    }
    closedir(d);
}

/* No temporary file is left in dir: none of the names ends in ".tmp" or ".partial". */
static void assert_no_temporary(void) {
    char names[1024];
    listing(names, sizeof names);
    assert_null(strstr(names, ".tmp"));
    assert_null(strstr(names, ".partial"));
}

/* ---- fillers ---- */

typedef struct text_job {
    const char *text;
    size_t repeat;
} text_job;

static snug_status put_text(FILE *f, void *user, snug_error *err) {
    (void)err;
    const text_job *job = user;
    for (size_t i = 0; i < job->repeat; i++) fputs(job->text, f);
    return SNUG_OK;
}

static snug_status fail_halfway(FILE *f, void *user, snug_error *err) {
    fputs((const char *)user, f);
    return snug_fail(err, SNUG_E_FORMAT, "the filler gave up");
}

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- tests ---- */

static void test_writes_whole_file(void **state) {
    (void)state;
    const char *path = in_dir("a.txt");
    spit(path, "old");
    snug_error err = {0};
    text_job job = {.text = "new content\n", .repeat = 3};
    assert_int_equal(atomic_file_write(path, NULL, "note", put_text, &job, &err), SNUG_OK);
    char *text = slurp(path);
    assert_string_equal(text, "new content\nnew content\nnew content\n");
    free(text);
    assert_no_temporary();
    /* a temporary name of the caller's, in the same folder */
    job.text = "x";
    assert_int_equal(atomic_file_write(path, in_dir(".a.partial"), "note", put_text, &job, &err), SNUG_OK);
    text = slurp(path);
    assert_string_equal(text, "xxx");
    free(text);
    assert_no_temporary();
}

static void test_failed_filler_keeps_old_file(void **state) {
    (void)state;
    const char *path = in_dir("b.txt");
    spit(path, "old");
    snug_error err = {0};
    assert_int_equal(atomic_file_write(path, NULL, "note", fail_halfway, "half", &err), SNUG_E_FORMAT);
    assert_non_null(strstr(err.message, "the filler gave up"));
    char *text = slurp(path);
    assert_string_equal(text, "old");
    free(text);
    assert_no_temporary();
}

/* The file system refuses bytes past a size limit (RLIMIT_FSIZE: EFBIG): a real failed write. */
static void test_refused_write_keeps_old_file(void **state) {
    (void)state;
    const char *path = in_dir("c.txt");
    spit(path, "old");
    struct rlimit was;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
    if (was.rlim_max != RLIM_INFINITY && was.rlim_max < 4096) skip();
    void (*before)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = {.rlim_cur = 4096, .rlim_max = was.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    snug_error err = {0};
    text_job job = {.text = "0123456789abcdef", .repeat = 4096}; /* 64 KiB */
    const snug_status s = atomic_file_write(path, NULL, "note", put_text, &job, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
    signal(SIGXFSZ, before);
    assert_int_equal(s, SNUG_E_IO);
    assert_non_null(strstr(err.message, "cannot write the note"));
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "left as it was"));
    char *text = slurp(path);
    assert_string_equal(text, "old");
    free(text);
    assert_no_temporary();
}

static void test_missing_folder(void **state) {
    (void)state;
    const char *path = in_dir("no/such/folder/d.txt");
    snug_error err = {0};
    text_job job = {.text = "x", .repeat = 1};
    assert_int_equal(atomic_file_write(path, NULL, "note", put_text, &job, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "cannot create the note"));
    assert_non_null(strstr(err.message, "check that its folder exists and is writable"));
    /* a "folder" that is a file */
    const char *file = in_dir("plain");
    spit(file, "x");
    char inside[300];
    snprintf(inside, sizeof inside, "%s/d.txt", file);
    assert_int_equal(atomic_file_write(inside, NULL, "note", put_text, &job, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, inside));
    assert_non_null(strstr(err.message, "check that its folder exists and is writable"));
    remove(file);
}

/* A folder without write permission (root writes anyway: nothing to test then). */
static void test_unwritable_folder(void **state) {
    (void)state;
    if (geteuid() == 0) skip();
    const char *sub = in_dir("locked");
    assert_int_equal(mkdir(sub, 0755), 0);
    char path[300];
    snprintf(path, sizeof path, "%s/e.txt", sub);
    spit(path, "old");
    assert_int_equal(chmod(sub, 0555), 0);
    snug_error err = {0};
    text_job job = {.text = "x", .repeat = 1};
    assert_int_equal(atomic_file_write(path, NULL, "note", put_text, &job, &err), SNUG_E_IO);
    assert_int_equal(chmod(sub, 0755), 0);
    assert_non_null(strstr(err.message, "check that its folder exists and is writable"));
    char *text = slurp(path);
    assert_string_equal(text, "old");
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_whole_file),
        cmocka_unit_test(test_failed_filler_keeps_old_file),
        cmocka_unit_test(test_refused_write_keeps_old_file),
        cmocka_unit_test(test_missing_folder),
        cmocka_unit_test(test_unwritable_folder),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
