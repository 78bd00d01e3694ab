/* The memory timeline as a table: one row per schedule step of each plan, with the bytes live in each category
 * and their total. Plain RFC 4180 CSV: fields holding a comma, a quote or a line break are quoted. */
#define _POSIX_C_SOURCE 200809L
#include "report/timeline.h"

#include <string.h>

static int put_field(FILE *out, const char *s) {
    if (!s) s = "";
    if (strpbrk(s, ",\"\r\n") == NULL) return fputs(s, out) < 0 ? -1 : 0;
    if (fputc('"', out) == EOF) return -1;
    for (; *s; s++) {
        if (*s == '"' && fputc('"', out) == EOF) return -1;
        if (fputc(*s, out) == EOF) return -1;
    }
    return fputc('"', out) == EOF ? -1 : 0;
}

static int write_header(FILE *out) {
    if (fputs("plan,step,layer,phase", out) < 0) return -1;
    for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++)
        if (fprintf(out, ",%s", snug_mem_category_name((snug_mem_category)c)) < 0) return -1;
    return fputs(",total\n", out) < 0 ? -1 : 0;
}

static int write_step(FILE *out, const char *plan_name, size_t i, const snug_plan_step_info *s) {
    if (fprintf(out, "%s,%zu,", plan_name, i) < 0 || put_field(out, s->layer) != 0) return -1;
    if (fprintf(out, ",%s", snug_phase_name(s->phase)) < 0) return -1;
    size_t total = 0;
    for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++) {
        total += s->bytes[c];
        if (fprintf(out, ",%zu", s->bytes[c]) < 0) return -1;
    }
    return fprintf(out, ",%zu\n", total) < 0 ? -1 : 0;
}

int plan_timeline_csv(const plan_timeline *t, FILE *out) {
    if (write_header(out) != 0) return -1;
    for (int p = 0; p < PLAN_TIMELINE_PLANS; p++) {
        const snug_plan *plan = t->plans[p].plan;
        size_t n = snug_plan_step_count(plan);
        for (size_t i = 0; i < n; i++) {
            snug_plan_step_info s;
            snug_plan_step(plan, i, &s);
            if (write_step(out, t->plans[p].name, i, &s) != 0) return -1;
        }
    }
    return 0;
}
