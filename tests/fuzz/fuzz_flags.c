/* Flag values: sizes (snug_parse_size), checkpoint policies (snug_parse_checkpoint, which must read back what
 * snug_format_checkpoint writes), data set names (snug_data_name_valid), and whole command lines of `snug
 * train`, `snug plan` and `snug eval` through the CLI's flag parser (src/cli/args.c, flags.c: whole numbers,
 * reals, durations, choices). The first byte chooses the command; the rest, cut at NUL bytes, is its argv. */
#include "fuzz_util.h"

#include "cli/args.h"

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

static void parse_value(const char *s) {
    size_t bytes;
    snug_error err = {0};
    if (snug_parse_size(s, &bytes, &err) == SNUG_OK && bytes == 0) {
        fprintf(stderr, "fuzz: snug_parse_size('%s') gave 0 bytes\n", s);
        abort();
    }
    snug_checkpoint_policy p, q;
    if (snug_parse_checkpoint(s, &p, &err) == SNUG_OK) {
        char text[64];
        snug_format_checkpoint(p, text, sizeof text);
        if (snug_parse_checkpoint(text, &q, &err) != SNUG_OK || q.kind != p.kind || q.every != p.every) {
            fprintf(stderr, "fuzz: checkpoint policy '%s' is written '%s', which does not read back\n", s, text);
            abort();
        }
    }
    char why[256];
    snug_data_name_valid(s, why, sizeof why);
    snug_model_is_file(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *text = malloc(size + 1); /* the bytes after the first, NUL-terminated: argv's strings */
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    static const char *const commands[3] = {"train", "plan", "eval"};
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)commands[data[0] % 3];
    for (char *s = text; s < text + size - 1 && argc <= MAX_ARGS; s += strlen(s) + 1) {
        argv[argc++] = s;
        parse_value(s);
    }
    argv[argc] = NULL;
    char msg[512];
    switch (data[0] % 3) {
    case 0: {
        cli_train_options o;
        cli_parse_train(argc, argv, &o, msg, sizeof msg);
        break;
    }
    case 1: {
        cli_plan_options o;
        cli_parse_plan(argc, argv, &o, msg, sizeof msg);
        break;
    }
    default: {
        cli_eval_options o;
        cli_parse_eval(argc, argv, &o, msg, sizeof msg);
        break;
    }
    }
    free(text);
    return 0;
}
