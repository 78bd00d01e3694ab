/* The flag-table parser and help printer (cli/flags.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/flags.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/decimal.h"
#include "snug.h"

bool flags_fail(char *msg, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return false;
}

/* strtol and friends skip leading blanks and accept an empty tail; a flag value must be the number alone. */
static bool starts_like_number(const char *s) {
    return s[0] != '\0' && !isspace((unsigned char)s[0]);
}

static bool parse_long(const char *s, long *out) {
    if (!starts_like_number(s)) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    /* strtoull would silently wrap "-1" around to 2^64 - 1 */
    if (!starts_like_number(s) || s[0] == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = (uint64_t)v;
    return true;
}

/* A decimal number (no hexadecimal, inf or nan: core/decimal.h) that a float holds: -1 when s is none, 0 when
 * a float cannot hold it (beyond FLT_MAX, or below FLT_MIN but not 0), 1 when *out is set. */
static int parse_float(const char *s, float *out) {
    if (!starts_like_number(s) || decimal_length(s) != strlen(s)) return -1;
    const double v = strtod(s, NULL);
    if (!(fabs(v) <= FLT_MAX) || (v != 0 && fabs(v) < FLT_MIN)) return 0;
    *out = (float)v;
    return 1;
}

static void describe_int_range(const flag *f, char *buf, size_t len) {
    if (f->max == LONG_MAX) snprintf(buf, len, "a whole number >= %ld", f->min);
    else snprintf(buf, len, "a whole number from %ld to %ld", f->min, f->max);
}

static void describe_float_range(const flag *f, char *buf, size_t len) {
    char lo[64], hi[64] = "";
    snprintf(lo, sizeof lo, "%s %g", f->fmin_open ? ">" : ">=", f->fmin);
    if (f->fmax != UNBOUNDED) snprintf(hi, sizeof hi, " and %s %g", f->fmax_open ? "<" : "<=", f->fmax);
    snprintf(buf, len, "a number %s%s", lo, hi);
}

static bool float_in_range(const flag *f, float v) {
    if (f->fmin_open ? !(v > f->fmin) : !(v >= f->fmin)) return false;
    if (f->fmax != UNBOUNDED && (f->fmax_open ? !(v < f->fmax) : !(v <= f->fmax))) return false;
    return true;
}

static void join_names(const char *const *names, const char *sep, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; names[i] && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? sep : "", names[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

static int find_name(const char *const *names, const char *value) {
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], value) == 0) return i;
    return -1;
}

static bool set_integer(const flag *f, void *field, const char *value, char *msg, size_t len) {
    long v;
    if (!parse_long(value, &v) || v < f->min || v > f->max) {
        char range[96];
        describe_int_range(f, range, sizeof range);
        return flags_fail(msg, len, "--%s must be %s, got '%s'", f->name, range, value);
    }
    if (f->kind == F_SIZE) *(size_t *)field = (size_t)v;
    else if (f->kind == F_INT) *(int *)field = (int)v; /* [min, max] lies within int's range */
    else *(long *)field = v;
    return true;
}

/* The library's parsers: a size ("256MiB") or a duration ("10m"). */
static bool set_parsed(const flag *f, void *field, const char *value, char *msg, size_t len) {
    snug_error err = {0};
    snug_status s = f->kind == F_BYTES ? snug_parse_size(value, (size_t *)field, &err)
                                       : snug_parse_duration(value, (double *)field, &err);
    return s == SNUG_OK || flags_fail(msg, len, "--%s: %s", f->name, err.message);
}

static bool set_name(const flag *f, void *field, const char *value, char *msg, size_t len) {
    if (f->files && snug_model_is_file(value)) { /* read (and checked) when the command loads it */
        *(const char **)field = value;
        return true;
    }
    const char *const *names = f->names();
    int i = find_name(names, value);
    if (i < 0) {
        char list[256];
        join_names(names, ", ", list, sizeof list);
        return flags_fail(msg, len, "unknown %s '%s' for --%s (choose from %s%s)", f->what, value, f->name, list,
                     f->files ? ", or give a file: a path with a '/' or ending in .ini or .onnx" : "");
    }
    *(const char **)field = names[i];
    return true;
}

static bool set_checkpoint(const flag *f, void *opt, const char *value, char *msg, size_t len) {
    snug_error err = {0};
    if (snug_parse_checkpoint(value, (snug_checkpoint_policy *)((char *)opt + f->offset), &err) != SNUG_OK)
        return flags_fail(msg, len, "--%s: %s", f->name, err.message);
    *(bool *)((char *)opt + f->aux) = true;
    return true;
}

/* A size, or "auto" (SNUG_MICRO_BATCH_AUTO); either way the companion switch records that the flag was given. */
static bool set_micro(const flag *f, void *opt, const char *value, char *msg, size_t len) {
    size_t *size = (size_t *)((char *)opt + f->offset);
    *(bool *)((char *)opt + f->aux) = true;
    long v;
    if (strcmp(value, "auto") == 0) return *size = SNUG_MICRO_BATCH_AUTO, true;
    if (parse_long(value, &v) && v >= f->min && v <= f->max) return *size = (size_t)v, true;
    char range[96];
    describe_int_range(f, range, sizeof range);
    return flags_fail(msg, len, "--%s must be %s or auto, got '%s'", f->name, range, value);
}

static bool set_path(const flag *f, void *field, const char *value, char *msg, size_t len) {
    if (!f->accepts(value)) return flags_fail(msg, len, "--%s must name %s, got '%s'", f->name, f->expect, value);
    *(const char **)field = value;
    return true;
}

/* Stores value into the field of flag f in the options struct opt; value is NULL only for flags that take
 * none. */
static bool set_flag(const flag *f, void *opt, const char *value, char *msg, size_t len) {
    void *field = (char *)opt + f->offset;
    char list[256];
    int range;
    switch (f->kind) {
    case F_SIZE: case F_INT:
    case F_LONG: return set_integer(f, field, value, msg, len);
    case F_U64:
        if (!parse_u64(value, (uint64_t *)field))
            return flags_fail(msg, len, "--%s must be a whole number >= 0, got '%s'", f->name, value);
        return true;
    case F_FLOAT:
        if ((range = parse_float(value, (float *)field)) == 0)
            return flags_fail(msg, len, "--%s: '%s' is out of range (a float32: 0, or %g to %g in size)", f->name,
                              value, FLT_MIN, FLT_MAX);
        if (range < 0 || !float_in_range(f, *(float *)field)) {
            describe_float_range(f, list, sizeof list);
            return flags_fail(msg, len, "--%s must be %s, got '%s'", f->name, list, value);
        }
        if (f->aux) *(bool *)((char *)opt + f->aux) = true;
        return true;
    case F_BYTES:
    case F_SECONDS: return set_parsed(f, field, value, msg, len);
    case F_SWITCH:
    case F_HELP: *(bool *)field = true; return true;
    case F_STRING:
        if (value[0] == '\0') return flags_fail(msg, len, "--%s needs a non-empty value", f->name);
        *(const char **)field = value;
        return true;
    case F_NAME: return set_name(f, field, value, msg, len);
    case F_CHOICE: {
        int i = find_name(f->choices, value);
        if (i < 0) {
            join_names(f->choices, ", ", list, sizeof list);
            return flags_fail(msg, len, "--%s must be one of %s, got '%s'", f->name, list, value);
        }
        *(int *)field = i;
        return true;
    }
    case F_CHECKPOINT: return set_checkpoint(f, opt, value, msg, len);
    case F_MICRO: return set_micro(f, opt, value, msg, len);
    case F_PATH: return set_path(f, field, value, msg, len);
    case F_GROUP: break;
    }
    return flags_fail(msg, len, "internal error: flag --%s has no parser", f->name);
}

static const flag *find_flag(const flag_table *t, const char *name, size_t name_len) {
    for (size_t i = 0; i < t->n; i++) {
        const flag *f = &t->flags[i];
        if (f->kind != F_GROUP && strlen(f->name) == name_len && strncmp(f->name, name, name_len) == 0) return f;
    }
    return NULL;
}

static bool takes_value(const flag *f) { return f->kind != F_SWITCH && f->kind != F_HELP; }

/* One argument at argv[*i], and its value from "=value" or the next argument. */
static bool parse_one(const flag_table *t, int argc, char **argv, int *i, void *opt, char *msg, size_t len) {
    const char *arg = argv[*i];
    if (strcmp(arg, "-h") == 0) arg = "--help";
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
        return flags_fail(msg, len, "unexpected argument '%s'", arg);
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
    const flag *f = find_flag(t, name, name_len);
    if (!f) return flags_fail(msg, len, "unknown flag '--%.*s'", (int)name_len, name);
    const char *value = NULL;
    if (!takes_value(f)) {
        if (eq) return flags_fail(msg, len, "--%s takes no value", f->name);
    } else if (eq) {
        value = eq + 1;
    } else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) {
        /* a value starting with "--" is the next flag, not this one's value ("--batch --lr 0.1"); such a
         * value can still be given as --flag=--value */
        value = argv[++*i];
    } else {
        return flags_fail(msg, len, "--%s needs a value (%s)", f->name, f->metavar);
    }
    return set_flag(f, opt, value, msg, len);
}

bool flags_parse(const flag_table *t, int argc, char **argv, void *opt, char *msg, size_t len) {
    const bool *help = (const bool *)((const char *)opt + t->help_offset);
    for (int i = 1; i < argc; i++) {
        if (!parse_one(t, argc, argv, &i, opt, msg, len)) return false;
        if (*help) return true;
    }
    return true;
}

#define HELP_INDENT 28
#define HELP_WIDTH 100

/* Writes text word by word from column `col`, wrapping at HELP_WIDTH onto lines indented by HELP_INDENT. */
static void print_wrapped(FILE *out, const char *text, int col) {
    while (*text) {
        int word = (int)strcspn(text, " ");
        if (col > HELP_INDENT && col + 1 + word > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_INDENT, "");
            col = HELP_INDENT;
        } else if (col > HELP_INDENT) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", word, text);
        col += word;
        text += word;
        while (*text == ' ') text++;
    }
    fputc('\n', out);
}

static void print_flag_help(FILE *out, const flag *f) {
    char names[256];
    const char *metavar = f->metavar;
    if (f->kind == F_NAME) {
        join_names(f->names(), "|", names, sizeof names);
        if (f->files) snprintf(names + strlen(names), sizeof names - strlen(names), "|FILE");
        metavar = names;
    }
    int col = fprintf(out, "  --%s%s%s", f->name, metavar ? " " : "", metavar ? metavar : "");
    if (col >= HELP_INDENT - 1) {
        fprintf(out, "\n");
        col = 0;
    }
    fprintf(out, "%*s", HELP_INDENT - col, "");
    print_wrapped(out, f->help, HELP_INDENT);
}

void flags_print_help(FILE *out, const flag_table *t) {
    for (size_t i = 0; i < t->n; i++) {
        const flag *f = &t->flags[i];
        if (f->kind == F_GROUP) fprintf(out, "\n%s:\n", f->name);
        else print_flag_help(out, f);
    }
}
