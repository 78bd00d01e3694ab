/* --data (cli/data_sets.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/data_sets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

bool cli_data_valid(const char *value, char *msg, size_t len) {
    char why[256];
    if (snug_data_name_valid(value, why, sizeof why)) return true;
    snprintf(msg, len, "--data: %s", why);
    return false;
}

snug_status cli_data_open(const char *value, const char *dir, const snug_graph *g, bool want_train,
                          const snug_data_options *opt, cli_data *d, snug_error *err) {
    const char *env = getenv("SNUG_DATA_DIR");
    const bool mnist = strncmp(value, "mnist", 5) == 0;
    if (!dir && mnist && env && env[0]) dir = env;
    snug_status st = snug_data_open(value, dir, snug_tensor_shape(g, 0), want_train, opt, d, err);
    if (st == SNUG_E_IO && (mnist || strcmp(value, "brown") == 0))
        snug_error_append(err, "; run `make data` to download %s into data/%s, or point --data-dir%s at its files",
                          mnist ? "MNIST" : "the Brown corpus", mnist ? "mnist" : "brown",
                          mnist ? " (or SNUG_DATA_DIR)" : "");
    return st;
}

/* The MNIST variant whose samples have the model's input shape, if one does. */
static const char *mnist_that_fits(const snug_graph *g) {
    snug_shape in = snug_tensor_shape(g, 0);
    if (in.rank != 3 || in.dims[0] != 1 || in.dims[1] != in.dims[2]) return NULL;
    return in.dims[1] == 28 ? "mnist" : in.dims[1] == 32 ? "mnist32" : NULL;
}

snug_status cli_data_check(const cli_data *d, const snug_trainer *tr, const snug_graph *g, snug_error *err) {
    snug_status st = d->train ? snug_trainer_check_dataset(tr, d->train, err) : SNUG_OK;
    if (st == SNUG_OK && d->eval) st = snug_trainer_check_dataset(tr, d->eval, err);
    if (st != SNUG_OK) {
        const char *fits = mnist_that_fits(g);
        const snug_dataset *ds = d->train ? d->train : d->eval;
        if (fits && strncmp(d->kind, "mnist", 5) == 0 && strcmp(fits, d->kind) != 0)
            snug_error_append(err, "; use --data %s", fits);
        else if (strstr(err->message, " predicts ")) /* only the class counts differ (the trainer checks them last) */
            snug_error_append(err, " (give --classes %zu to make the model's last layer predict the data's classes)",
                              snug_dataset_classes(ds));
        else snug_error_append(err, " (--data %s does not fit this model; `snug train --help` lists the data sets)",
                               d->kind);
    }
    return st;
}
