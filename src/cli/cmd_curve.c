/* `snug curve LOG -o FILE.svg`: draws a run's log (snug train --log) as training and evaluation curves
 * (snug_curve_write). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"

#define CURVE_USAGE "usage: snug curve LOG.jsonl|LOG.csv -o FILE.svg [--title TEXT]"

void cli_curve_help(FILE *out) {
    fprintf(out, "%s\n\nDraw a run's log (snug train --log) as a picture: the training loss of every step (and "
                 "its smoothed line),\nthe evaluation loss, and the accuracy or mean IoU on a second axis, against "
                 "optimizer steps,\nepochs marked. The picture is written atomically.\n\n"
                 "  -o, --output FILE.svg   where to write it [required]\n"
                 "  --title TEXT            its title [the log's file name]\n"
                 "  --help                  show this help and exit\n\n"
                 "Exit status: 0 done, 1 runtime error (log unreadable or malformed), 2 usage error.\n"
                 "Example: snug train --log run.jsonl ... && snug curve run.jsonl -o run.svg\n", CURVE_USAGE);
}

int cmd_curve(int argc, char **argv) {
    const char *log = NULL, *svg = NULL, *title = NULL;
    char msg[320];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return cli_curve_help(stdout), CLI_EXIT_OK;
        const bool output = !strcmp(a, "-o") || !strcmp(a, "--output"), named = !strcmp(a, "--title");
        if ((output || named) && !next)
            return snprintf(msg, sizeof msg, "%s needs a value", a), cli_usage_error("curve", CURVE_USAGE, msg);
        if (output) svg = argv[++i];
        else if (named) title = argv[++i];
        else if (a[0] == '-' || log)
            return snprintf(msg, sizeof msg, "unexpected argument '%.256s'", a), cli_usage_error("curve", CURVE_USAGE, msg);
        else log = a;
    }
    if (!log || !svg) return cli_usage_error("curve", CURVE_USAGE, log ? "-o FILE.svg is required" : "no log given");
    snug_error err = {0};
    if (snug_curve_write(log, svg, title, &err) != SNUG_OK) return cli_runtime_error(&err);
    printf("curve of %s written to %s\n", log, svg);
    return CLI_EXIT_OK;
}
