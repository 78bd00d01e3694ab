/* `snug eval`'s per-class report for a classifier: each class's accuracy, its most frequent wrong answer, and
 * (for up to CONFUSION_MAX classes) the confusion matrix, rows the true class, columns the prediction. */
#define _POSIX_C_SOURCE 200809L
#include "cli/eval_classes.h"

#include "core/escape.h"

#define CONFUSION_MAX 20

/* Class c's name (escaped: it comes from a file), or its number. */
static const char *label(const char *const *names, size_t c, char *buf, size_t len) {
    if (names && names[c]) snprintf(buf, len, "%s", escape_text(names[c]).text);
    else snprintf(buf, len, "%zu", c);
    return buf;
}

void cli_print_classes(FILE *out, const size_t *m, size_t classes, const char *const *names) {
    char a[ESCAPED_MAX], b[ESCAPED_MAX];
    fprintf(out, "%-24s %9s %9s   %s\n", "class", "accuracy", "items", "most often taken for");
    for (size_t t = 0; t < classes; t++) {
        size_t row = 0, worst = t;
        for (size_t p = 0; p < classes; p++) {
            row += m[t * classes + p];
            if (p != t && (worst == t || m[t * classes + p] > m[t * classes + worst])) worst = p;
        }
        fprintf(out, "%-24.24s %8.2f%% %9zu", label(names, t, a, sizeof a), row ? 100.0 * m[t * classes + t] / row : 0,
                row);
        if (worst != t && m[t * classes + worst])
            fprintf(out, "   %s (%.1f%%)", label(names, worst, b, sizeof b), 100.0 * m[t * classes + worst] / row);
        fputc('\n', out);
    }
    if (classes > CONFUSION_MAX) return;
    fprintf(out, "confusion matrix (rows: true class, columns: predicted class, by number):\n%6s", "");
    for (size_t p = 0; p < classes; p++) fprintf(out, " %6zu", p);
    for (size_t t = 0; t < classes; t++) {
        fprintf(out, "\n%6zu", t);
        for (size_t p = 0; p < classes; p++) fprintf(out, " %6zu", m[t * classes + p]);
    }
    fputc('\n', out);
}
