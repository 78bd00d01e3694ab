/* Reading a model file: text -> sections with their keys, each with its line number. libinih parses the file;
 * it hands its callback no line numbers (Debian's libinih 55 is built without INI_HANDLER_LINENO), so a
 * pre-scan walks the lines with libinih's own rules first and records where every [section] and every key
 * sits; the n-th callback is the n-th key line. The pre-scan also catches what libinih accepts silently and a
 * layer list must not: two sections of one name, keys above any section, values continued on indented lines,
 * lines longer than libinih's buffer. The first problem by line number is reported. */
#define _POSIX_C_SOURCE 200809L
#include "graph/model_file.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/escape.h"
#include "core/grow.h"

#define MF_MAX_LINE 197        /* libinih's line buffer is 200 bytes: the text, "\r\n" and the NUL */
#define MF_MAX_SECTION 49      /* libinih's section buffer is 50 bytes: longer names are cut silently */
#define MF_MAX_FILE (16u << 20) /* a model file is a few kB; anything this large is not one */


/* ---- the pre-scan ------------------------------------------------------------------------------------ */

/* The first problem found, by line number: the pre-scan, libinih and the callback each report theirs. */
typedef struct first_problem {
    int line;               /* 0: none yet */
    snug_error err;
} first_problem;

typedef struct key_line {
    int line;
    int section;            /* index into the doc's sections */
} key_line;

typedef struct reader {
    mf_doc *doc;
    key_line *keys;
    int n_keys, cap_keys;
    int next_key;           /* the key line the next libinih callback belongs to */
    first_problem problem;
    bool oom;
} reader;

/* Records a problem unless an earlier line has one; returns false, so scanners can `return note(...)`. */
__attribute__((format(printf, 5, 6))) static bool note(reader *r, int line, snug_status s, const char *layer,
                                                       const char *fmt, ...) {
    if (r->problem.line && r->problem.line <= line) return false;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->problem.line = line;
    mf_fail(&r->problem.err, s, r->doc, line, layer, "%s", msg);
    return false;
}

static char *dup_range(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* libinih's find_chars_or_comment: the first of `chars`, or a ';' that follows a blank (an inline comment),
 * or the end of [s, end). */
static const char *find_chars_or_comment(const char *s, const char *end, const char *chars) {
    bool was_space = false;
    for (; s < end; s++) {
        if (chars && strchr(chars, *s)) return s;
        if (was_space && *s == ';') return s;
        was_space = isspace((unsigned char)*s);
    }
    return end;
}

static bool name_char_ok(char c) {
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-';
}

/* A [header]: records the section, checking its name. */
static bool scan_section(reader *r, const char *name, size_t n, int line) {
    while (n && isspace((unsigned char)*name)) name++, n--;
    while (n && isspace((unsigned char)name[n - 1])) n--;
    char shown[MF_MAX_SECTION + 8]; /* raw: mf_fail escapes the layer name it prints */
    snprintf(shown, sizeof shown, "%.*s%s", (int)(n < MF_MAX_SECTION ? n : MF_MAX_SECTION), name,
             n > MF_MAX_SECTION ? "..." : "");
    if (n == 0) return note(r, line, SNUG_E_FORMAT, NULL, "a section without a name: write [LAYER_NAME]");
    if (n > MF_MAX_SECTION)
        return note(r, line, SNUG_E_FORMAT, shown, "the name is too long (at most %d characters)", MF_MAX_SECTION);
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok(name[i]))
            return note(r, line, SNUG_E_FORMAT, shown, "a layer name holds letters, digits, '_', '.' and '-' "
                        "only (found '%s'): rename it", escape_range(&name[i], 1).text);
    mf_doc *d = r->doc; /* two sections of one name: check_unique_names, once every section is read */
    if (!grow_array((void **)&d->sections, &d->cap_sections, d->n_sections + 1, sizeof *d->sections)) {
        return r->oom = true, false;
    }
    mf_section *s = &d->sections[d->n_sections];
    memset(s, 0, sizeof *s);
    s->line = line;
    s->name = dup_range(name, n);
    if (!s->name) return r->oom = true, false;
    d->n_sections++;
    return true;
}

static bool scan_key(reader *r, const char *start, size_t n, int line) {
    while (n && isspace((unsigned char)start[n - 1])) n--;
    if (r->doc->n_sections == 0)
        return note(r, line, SNUG_E_FORMAT, NULL, "'%s' comes before any section: start the file with [model]",
                    escape_range(start, n).text);
    if (!grow_array((void **)&r->keys, &r->cap_keys, r->n_keys + 1, sizeof *r->keys)) {
        return r->oom = true, false;
    }
    r->keys[r->n_keys++] = (key_line){.line = line, .section = r->doc->n_sections - 1};
    return true;
}

/* One line [s, end), classified as libinih classifies it. *after_key: the previous content line of this section
 * was a key (then an indented line continues its value). Syntax errors are left to libinih. The scanners return
 * false after a problem; the scan goes on regardless, since libinih may find an earlier one. */
static bool scan_line(reader *r, const char *s, const char *end, int line, bool *after_key) {
    const char *line_start = s;
    if (end - s > MF_MAX_LINE)
        return note(r, line, SNUG_E_FORMAT, NULL, "the line is longer than %d characters: split it",
                    MF_MAX_LINE);
    while (end > s && isspace((unsigned char)end[-1])) end--;
    while (s < end && isspace((unsigned char)*s)) s++;
    if (s == end || *s == ';' || *s == '#') return true;
    if (*after_key && s > line_start)
        return note(r, line, SNUG_E_FORMAT, NULL, "an indented line continues the value of the key above "
                    "(INI multi-line values): a model file has one 'key = value' per line, unindent it");
    if (*s == '[') {
        const char *close = find_chars_or_comment(s + 1, end, "]");
        *after_key = false;
        return close < end && *close == ']' ? scan_section(r, s + 1, (size_t)(close - s - 1), line) : true;
    }
    const char *eq = find_chars_or_comment(s, end, "=:");
    if (eq < end && (*eq == '=' || *eq == ':')) {
        *after_key = true;
        return scan_key(r, s, (size_t)(eq - s), line);
    }
    return true;
}

static int by_name_then_line(const void *a, const void *b) {
    const mf_section *x = *(const mf_section *const *)a, *y = *(const mf_section *const *)b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Two sections of one name: the later is the problem. Found by sorting the names once all are read, since
 * comparing each section with every one above it makes reading quadratic in the layers; note() keeps the
 * earliest line, so the problem reported is the one the scan would meet first. */
static void check_unique_names(reader *r) {
    const mf_doc *d = r->doc;
    const mf_section **sorted = malloc((size_t)(d->n_sections ? d->n_sections : 1) * sizeof *sorted);
    if (!sorted) {
        r->oom = true;
        return;
    }
    for (int i = 0; i < d->n_sections; i++) sorted[i] = &d->sections[i];
    qsort(sorted, (size_t)d->n_sections, sizeof *sorted, by_name_then_line);
    for (int i = 1, first = 0; i < d->n_sections; i++) {
        if (strcmp(sorted[i]->name, sorted[first]->name) != 0) {
            first = i;
            continue;
        }
        note(r, sorted[i]->line, SNUG_E_FORMAT, sorted[i]->name, "duplicate name: a section [%s] is already on "
             "line %d (every layer needs its own name)", sorted[i]->name, sorted[first]->line);
    }
    free(sorted);
}

/* Walks every line; returns the number of lines with content (not blank, not a comment). */
static int prescan(reader *r, const char *text) {
    const char *s = text;
    if ((unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF) s += 3;
    int line = 0, content = 0;
    bool after_key = false;
    while (*s && !r->oom) {
        const char *nl = strchr(s, '\n');
        const char *end = nl ? nl : s + strlen(s);
        line++;
        const char *c = s;
        while (c < end && isspace((unsigned char)*c)) c++;
        if (c < end && *c != ';' && *c != '#') content++;
        scan_line(r, s, end, line, &after_key);
        s = nl ? nl + 1 : end;
    }
    r->doc->last_line = line ? line : 1;
    if (!r->oom) check_unique_names(r);
    return content;
}

/* ---- libinih ------------------------------------------------------------------------------------------- */

/* One `key = value`: the next key line of the pre-scan. */
static int on_key(void *user, const char *section, const char *key, const char *value) {
    reader *r = user;
    (void)section;
    if (r->oom || r->next_key >= r->n_keys) return 1; /* a problem is reported already */
    key_line kl = r->keys[r->next_key++];
    mf_section *s = &r->doc->sections[kl.section];
    for (int i = 0; i < s->n_entries; i++)
        if (strcmp(s->entries[i].key, key) == 0) {
            note(r, kl.line, SNUG_E_FORMAT, s->name, "'%s' is given twice (first on line %d): keep one",
                 escape_text(key).text, s->entries[i].line);
            return 1;
        }
    if (!grow_array((void **)&s->entries, &s->cap_entries, s->n_entries + 1, sizeof *s->entries)) {
        r->oom = true;
        return 1;
    }
    mf_entry *e = &s->entries[s->n_entries];
    *e = (mf_entry){.key = dup_range(key, strlen(key)), .value = dup_range(value, strlen(value)),
                    .line = kl.line};
    if (!e->key || !e->value) {
        free(e->key);
        free(e->value);
        r->oom = true;
        return 1;
    }
    s->n_entries++;
    return 1;
}

static void doc_free(mf_doc *d) {
    for (int i = 0; i < d->n_sections; i++) {
        for (int k = 0; k < d->sections[i].n_entries; k++) {
            free(d->sections[i].entries[k].key);
            free(d->sections[i].entries[k].value);
        }
        free(d->sections[i].entries);
        free(d->sections[i].name);
    }
    free(d->sections);
}

/* Text -> sections; SNUG_OK or the first problem by line. */
static snug_status read_doc(mf_doc *d, const char *text, snug_error *err) {
    reader r = {.doc = d};
    int content = prescan(&r, text);
    if (!r.oom && content == 0) {
        free(r.keys);
        return mf_fail(err, SNUG_E_FORMAT, d, 1, NULL, "the model file is empty: it needs a [model] section "
                       "(input = ...) and a layer list ending in a loss (see docs/model-files.md)");
    }
    int bad = r.oom ? 0 : ini_parse_string(text, on_key, &r);
    if (bad > 0 && (!r.problem.line || bad < r.problem.line))
        note(&r, bad, SNUG_E_FORMAT, NULL, "syntax error (libinih): expected [LAYER_NAME], 'key = value' or a "
             "comment starting with ';' or '#'");
    free(r.keys);
    if (r.oom || bad == -2) return snug_fail(err, SNUG_E_OOM, "%s: out of memory while reading the model file",
                                             d->file);
    if (r.problem.line) {
        if (err) *err = r.problem.err;
        return r.problem.err.status;
    }
    return SNUG_OK;
}

/* ---- the public entry points ----------------------------------------------------------------------------- */

snug_status mf_parse(const char *text, const char *name_for_messages, size_t classes, snug_graph **out,
                     snug_error *err) {
    *out = NULL;
    mf_doc d = {.file = name_for_messages && *name_for_messages ? name_for_messages : "(model text)"};
    if (!text) return snug_fail(err, SNUG_E_ARG, "%s: no model text given", d.file);
    snug_error local = {0};
    if (read_doc(&d, text, &local) == SNUG_OK && (!classes || mf_set_classes(&d, classes, &local) == SNUG_OK))
        *out = mf_build(&d, &local);
    doc_free(&d);
    if (*out) return SNUG_OK;
    if (err) *err = local;
    return local.status != SNUG_OK ? local.status : SNUG_E_FORMAT;
}

snug_status snug_model_parse(const char *text, const char *name_for_messages, snug_graph **out, snug_error *err) {
    return mf_parse(text, name_for_messages, 0, out, err);
}

snug_status snug_model_parse_classes(const char *text, const char *name_for_messages, size_t classes,
                                     snug_graph **out, snug_error *err) {
    /* an ONNX model is binary: a caller holding "its text" (a resumed run) reads the file again */
    if (name_for_messages && mf_is_onnx(name_for_messages))
        return snug_model_builtin_classes(name_for_messages, classes, out, err);
    return mf_parse(text, name_for_messages, classes, out, err);
}

/* The whole file as a NUL-terminated string, or NULL with err filled. */
static char *read_text(const char *path, snug_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snug_fail(err, SNUG_E_IO, "cannot open model file '%s': %s (check the path)", path, strerror(errno));
        return NULL;
    }
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap + 1);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap || cap >= MF_MAX_FILE) break;
        char *p = realloc(buf, 2 * cap + 1);
        if (!p) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = p;
        cap *= 2;
    }
    bool failed = ferror(f);
    fclose(f);
    if (!buf) snug_fail(err, SNUG_E_OOM, "%s: out of memory while reading the model file", path);
    else if (failed) snug_fail(err, SNUG_E_IO, "%s: read error: %s", path, strerror(errno));
    else if (len >= MF_MAX_FILE)
        snug_fail(err, SNUG_E_FORMAT, "%s: larger than %u MiB: not a model file", path, MF_MAX_FILE >> 20);
    else if (memchr(buf, '\0', len))
        snug_fail(err, SNUG_E_FORMAT, "%s: holds a NUL byte: a model file is text (see docs/model-files.md)", path);
    else {
        buf[len] = '\0';
        return buf;
    }
    free(buf);
    return NULL;
}

snug_status mf_load(const char *path, size_t classes, snug_graph **out, snug_error *err) {
    *out = NULL;
    if (!path || !*path) return snug_fail(err, SNUG_E_ARG, "no model file path given");
    snug_error local = {0};
    char *text = read_text(path, &local);
    if (!text) {
        if (err) *err = local;
        return local.status;
    }
    snug_status s = mf_parse(text, path, classes, out, err);
    free(text);
    return s;
}

snug_status snug_model_load(const char *path, snug_graph **out, snug_error *err) {
    return mf_load(path, 0, out, err);
}
