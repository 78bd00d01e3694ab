/* The flag-table machinery every command's parser shares (snug-bench's too, bench/harness/): a table of flags
 * (name, kind, where the value goes in the options struct, help text) drives both the parser and the help, so
 * they cannot drift apart. Numbers are parsed strictly (the whole text, in range, no overflow); a message is one
 * line saying what is wrong ("unknown flag '--x'", "--steps must be a whole number from 0 to 100000"). */
#ifndef SNUG_CLI_FLAGS_H
#define SNUG_CLI_FLAGS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum flag_kind {
    F_GROUP,   /* not a flag: a heading in the help */
    F_SIZE,    /* size_t, a whole number in [min, max] */
    F_LONG,    /* long, a whole number in [min, max] */
    F_INT,     /* int, the same */
    F_U64,     /* uint64_t, any whole number >= 0 */
    F_FLOAT,   /* float, finite, in the range given by fmin/fmax */
    F_BYTES,   /* size_t, parsed by snug_parse_size ("256MiB") */
    F_SWITCH,  /* bool, set to true; takes no value */
    F_STRING,  /* const char *, any non-empty text */
    F_NAME,    /* const char *, one of names() */
    F_CHOICE,  /* int, the index of the value in choices */
    F_CHECKPOINT, /* snug_checkpoint_policy, parsed by snug_parse_checkpoint; sets the bool at aux */
    F_MICRO,   /* size_t in [min, max], or "auto" (SNUG_MICRO_BATCH_AUTO); sets the bool at aux (given) */
    F_PATH,    /* const char *, a path that accepts() takes (by its extension, say) */
    F_SECONDS, /* double, a duration parsed by snug_parse_duration: "90s", "10m", "2h", or seconds; 0 allowed */
    F_HELP,    /* --help */
} flag_kind;

typedef struct flag {
    const char *name;                  /* without the leading "--"; the heading for F_GROUP */
    flag_kind kind;
    size_t offset;                     /* of the field in the command's options struct */
    size_t aux;                        /* F_CHECKPOINT, F_MICRO, and F_FLOAT where not 0: offset of the
                                          companion bool that records the flag was given */
    const char *metavar;
    const char *help;                  /* ends with the default in brackets */
    long min, max;                     /* F_SIZE, F_LONG, F_INT */
    double fmin, fmax;                 /* F_FLOAT */
    bool fmin_open, fmax_open;         /* F_FLOAT: the bound itself is excluded */
    const char *const *choices;        /* F_CHOICE, NULL-terminated */
    const char *const *(*names)(void); /* F_NAME: the valid names, NULL-terminated */
    const char *what;                  /* F_NAME: what a name names, for messages */
    bool files;                        /* F_NAME: a value with a '/' or ending in .ini is a file path instead */
    bool (*accepts)(const char *path); /* F_PATH: whether the flag takes this path */
    const char *expect;                /* F_PATH: what it takes, for messages ("a .svg or a .csv file") */
} flag;

#define UNBOUNDED HUGE_VAL  /* F_FLOAT: no upper bound */
#define GROUP(title) {.name = (title), .kind = F_GROUP}

/* A command's flags: the table, and where its options struct keeps the --help switch. */
typedef struct flag_table {
    const flag *flags;
    size_t n;
    size_t help_offset;
} flag_table;

/* Parses argv[1..argc) into opt by table t: `--flag value`, `--flag=value`, `-h`. True on success, also when
 * --help came (help wins over whatever follows); false with one line in msg on a usage error. */
bool flags_parse(const flag_table *t, int argc, char **argv, void *opt, char *msg, size_t len);
/* One line per flag ("  --name METAVAR   help", wrapped at 100 columns), headings for F_GROUP entries. */
void flags_print_help(FILE *out, const flag_table *t);
/* Writes a usage-error message into msg; returns false so callers can `return flags_fail(...)`. */
bool flags_fail(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
