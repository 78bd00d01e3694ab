/* What the fuzz targets share: a private scratch folder for the files a reader needs (the library reads paths,
 * not memory), inputs cut into several files, the checksums a mutated input would otherwise always fail on, and
 * a small trainer for the weights and state readers. Header-only, so that a target is its own file plus this
 * header, built the same way by libFuzzer and by the replay driver (tests/fuzz/replay_main.c). */
#ifndef SNUG_TESTS_FUZZ_UTIL_H
#define SNUG_TESTS_FUZZ_UTIL_H

#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snug.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* ---- the scratch folder: one per process, removed at exit ---- */

static char fuzz_dir_path[64];

/* Removes the files of dir and of its subfolders (one level down is all the targets make), and the
 * subfolders themselves when `folders`. */
static inline void fuzz_clear(const char *dir, bool folders) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[1024];
        const int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (w < 0 || (size_t)w >= sizeof path) continue;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            fuzz_clear(path, true);
            if (folders) rmdir(path);
        } else {
            unlink(path);
        }
    }
    closedir(d);
}

static inline void fuzz_dir_remove(void) {
    if (!fuzz_dir_path[0]) return;
    fuzz_clear(fuzz_dir_path, true);
    rmdir(fuzz_dir_path);
}

/* The process's scratch folder, made on first use: in /dev/shm where there is one, so that writing an input
 * never waits on a disk another job keeps busy (a wait that libFuzzer would count against the input's time),
 * else in /tmp. Aborts when it cannot be made: a target that cannot write its input tests nothing. */
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        struct stat st;
        const bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/snug-fuzz-XXXXXX", shm ? "/dev/shm" : "/tmp");
        if (!mkdtemp(fuzz_dir_path)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* fuzz_dir()/name into buf (512 bytes). */
static inline const char *fuzz_path(char *buf, const char *name) {
    snprintf(buf, 512, "%s/%s", fuzz_dir(), name);
    return buf;
}

/* Writes data to path, replacing it. Aborts on failure, for the same reason as fuzz_dir. */
static inline void fuzz_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* ---- inputs made of several files ---- */

/* Cuts an input into up to max parts: each part is a 2-byte little-endian length and that many bytes (cut
 * short at the end of the input). Returns the number of parts. */
typedef struct fuzz_part {
    const uint8_t *data;
    size_t len;
} fuzz_part;

static inline size_t fuzz_parts(const uint8_t *data, size_t size, fuzz_part *parts, size_t max) {
    size_t n = 0, at = 0;
    while (n < max && at + 2 <= size) {
        size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
        at += 2;
        if (len > size - at) len = size - at;
        parts[n++] = (fuzz_part){data + at, len};
        at += len;
    }
    return n;
}

/* ---- checksums: a mutated input should reach the parser behind the checksum, not stop at it ---- */

static inline uint32_t fuzz_crc32(const uint8_t *p, size_t len) { /* zlib's CRC-32, as PNG chunks use it */
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c >> 1 ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

/* Rewrites the CRC of every whole chunk of a PNG file in place (type and data), so that libpng reads what the
 * chunks say instead of refusing the first mutated one. Files without the PNG signature are left alone. */
static inline void fuzz_fix_png_crcs(uint8_t *p, size_t len) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len < 8 || memcmp(p, sig, 8) != 0) return;
    for (size_t at = 8; at + 12 <= len;) {
        const uint32_t n = (uint32_t)p[at] << 24 | (uint32_t)p[at + 1] << 16 | (uint32_t)p[at + 2] << 8 | p[at + 3];
        if (n > len - at - 12) break;
        const uint32_t crc = fuzz_crc32(p + at + 4, 4 + (size_t)n);
        uint8_t *c = p + at + 8 + n;
        c[0] = (uint8_t)(crc >> 24), c[1] = (uint8_t)(crc >> 16), c[2] = (uint8_t)(crc >> 8), c[3] = (uint8_t)crc;
        at += 12 + (size_t)n;
    }
}

#endif
