/* Saving the weights as safetensors (the layout is in train/safetensors.h): parameters and BatchNorm's running
 * statistics alike, under their state_dict names, so PyTorch reads the file with safetensors.torch.load_file and
 * load_state_dict. Written atomically, with a checksum. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "train/trainer.h"

size_t trainer_param_tensors(const snug_trainer *tr, st_tensor *t) {
    for (int i = 0; i < tr->g->n_params; i++) {
        const graph_param *p = &tr->g->params[i];
        t[i] = (st_tensor){.name = p->name, .dims = p->shape.dims, .rank = p->shape.rank,
                           .values = (p->buffer ? tr->x.state : tr->x.params) + p->offset, .numel = p->numel};
    }
    return (size_t)tr->g->n_params;
}

#define RUNNING_MEAN ".running_mean"
#define COUNTER ".num_batches_tracked"

/* Where the graph asks for them (an ONNX export's BatchNorms), one "<bn>.num_batches_tracked" per BatchNorm,
 * the prefix its running mean's name has: an int64 scalar, the training micro-batches whose statistics the
 * layer kept, which is what PyTorch counts (one per forward in training mode; all BatchNorms alike). names
 * holds n_params names. Returns how many were added after t[0..). */
typedef char counter_name[2 * SNUG_NAME_MAX + sizeof COUNTER];
static size_t batchnorm_counters(const snug_trainer *tr, const int64_t *count, st_tensor *t, counter_name *names) {
    size_t n = 0;
    if (!tr->g->batchnorm_counters) return 0;
    for (int i = 0; i < tr->g->n_params; i++) {
        const graph_param *p = &tr->g->params[i];
        const size_t len = strlen(p->name), suffix = sizeof RUNNING_MEAN - 1;
        if (!p->buffer || len <= suffix || strcmp(p->name + len - suffix, RUNNING_MEAN) != 0) continue;
        snprintf(names[n], sizeof names[n], "%.*s" COUNTER, (int)(len - suffix), p->name);
        t[n] = (st_tensor){.name = names[n], .rank = 0, .numel = 1, .counts = count};
        n++;
    }
    return n;
}

snug_status snug_trainer_save(const snug_trainer *tr, const char *path, snug_error *err) {
    if (tr->dist.rank != 0) return SNUG_OK;
    const size_t slots = tr->g->n_params ? (size_t)tr->g->n_params : 1;
    st_tensor *t = malloc(2 * slots * sizeof *t);
    counter_name *names = tr->g->batchnorm_counters ? malloc(slots * sizeof *names) : NULL;
    const int64_t count = tr->stat_updates;
    snug_status s = SNUG_E_OOM;
    if (t && (names || !tr->g->batchnorm_counters)) {
        char steps[32];
        snprintf(steps, sizeof steps, "%ld", tr->step);
        st_pair meta[7] = {{"format", "pt"}, {"producer", "snug " SNUG_VERSION}, {"model", tr->g->name},
                           {"steps", steps}};
        size_t n = 4;
        /* the data's normalisation and class names, when fit knew them */
        if (tr->data_normalise[0]) meta[n++] = (st_pair){"normalise", tr->data_normalise};
        if (tr->data_classes) meta[n++] = (st_pair){"classes", tr->data_classes};
        if (tr->data_table) meta[n++] = (st_pair){"standardise", tr->data_table};
        size_t nt = trainer_param_tensors(tr, t);
        nt += batchnorm_counters(tr, &count, t + nt, names);
        s = st_write(path, NULL, t, nt, meta, n, err);
    } else {
        snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the tensor list of model '%s'", tr->g->name);
    }
    free(t);
    free(names);
    return s;
}

snug_status snug_check_output(const char *path, const char *what, snug_error *err) {
    struct stat st;
    char tmp[4096];
    if (!path || !*path) return snug_fail(err, SNUG_E_ARG, "the %s: a file name is needed", what);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return snug_fail(err, SNUG_E_IO, "the %s '%s' is a folder: name a file", what, path);
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return snug_fail(err, SNUG_E_ARG, "the %s '%s': the name is too long", what, path);
    /* the file is written beside its name and renamed: try that folder now, leaving nothing behind */
    const bool existed = stat(tmp, &st) == 0;
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return snug_fail(err, SNUG_E_IO, "cannot write the %s '%s': %s; check that its folder exists and is "
                         "writable", what, path, strerror(errno));
    close(fd);
    if (!existed) unlink(tmp);
    return SNUG_OK;
}
