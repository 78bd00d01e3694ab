/* The replay driver: runs LLVMFuzzerTestOneInput on every file named on the command line, and on every file of
 * every folder named (in name order), so that a fuzz target's committed corpus is replayed by any C compiler,
 * without libFuzzer. Exit status 0 when every input ran; a crash, a sanitizer report or a leak (under
 * LeakSanitizer) fails the process as it would under libFuzzer. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* One file: read whole, run once. 0, or 1 when it cannot be read. */
static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            uint8_t *p = realloc(buf, cap *= 2);
            if (!p) free(buf);
            buf = p;
        }
    }
    const int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 1;
    }
    /* A copy of exactly len bytes, as libFuzzer hands an input: a read past its end is caught by ASan. */
    uint8_t *input = malloc(len ? len : 1);
    if (!input) {
        free(buf);
        return 1;
    }
    memcpy(input, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(input, len);
    free(input);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every regular file of dir, in name order; *count receives how many ran. */
static int run_dir(const char *dir, size_t *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open folder %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!p) break;
            names = p;
        }
        names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!names[n]) break;
        sprintf(names[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            failed |= run_file(names[i]);
            (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return failed;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int failed = 0;
    size_t count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            failed |= run_dir(argv[i], &count);
        } else {
            failed |= run_file(argv[i]);
            count++;
        }
    }
    printf("replay: %zu inputs through %s%s\n", count, argv[0], failed ? " (some could not be read)" : "");
    if (count == 0) fprintf(stderr, "replay: no input found: an empty corpus tests nothing\n");
    return failed || count == 0;
}
