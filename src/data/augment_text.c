/* The text form of snug_augment: "flip,crop:4,brightness:0.2,contrast:0.2" (any order, each item once), what a
 * command line takes and a saved state records. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "snug.h"

#define AUGMENT_ITEMS "flip, crop:P (P pixels, 1..64), brightness:X and contrast:X (X in (0, 1])"
#define CROP_PAD_MAX 64

/* One item's value after its "name:", as a number in (lo, hi]; false when it is not one. */
static bool item_number(const char *value, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (value[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || !(v > lo) || !(v <= hi)) return false;
    *out = v;
    return true;
}

static snug_status parse_item(const char *item, snug_augment *a, snug_error *err) {
    const char *colon = strchr(item, ':');
    const size_t name_len = colon ? (size_t)(colon - item) : strlen(item);
    const char *value = colon ? colon + 1 : NULL;
    double v;
    if (!colon && strcmp(item, "flip") == 0) {
        a->flip = true;
        return SNUG_OK;
    }
    if (value && name_len == 4 && strncmp(item, "crop", 4) == 0 && item_number(value, 0, CROP_PAD_MAX, &v) &&
        v == floor(v)) {
        a->crop_pad = (size_t)v;
        return SNUG_OK;
    }
    if (value && name_len == 10 && strncmp(item, "brightness", 10) == 0 && item_number(value, 0, 1, &v)) {
        a->brightness = (float)v;
        return SNUG_OK;
    }
    if (value && name_len == 8 && strncmp(item, "contrast", 8) == 0 && item_number(value, 0, 1, &v)) {
        a->contrast = (float)v;
        return SNUG_OK;
    }
    return snug_fail(err, SNUG_E_ARG, "augmentation '%s' is not one snug knows: use %s, separated by commas",
                     item, AUGMENT_ITEMS);
}

snug_status snug_parse_augment(const char *text, snug_augment *out, snug_error *err) {
    *out = (snug_augment){0};
    if (!text || text[0] == '\0' || strcmp(text, "none") == 0) return SNUG_OK;
    char item[64];
    unsigned seen = 0; /* one bit per kind of item */
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= sizeof item)
            return snug_fail(err, SNUG_E_ARG, "augmentation list '%s' has an empty or overlong item: use %s, "
                             "separated by commas", text, AUGMENT_ITEMS);
        memcpy(item, p, len);
        item[len] = '\0';
        snug_status s = parse_item(item, out, err);
        if (s != SNUG_OK) return s;
        const unsigned bit = 1u << (item[0] == 'f' ? 0 : item[0] == 'c' && item[1] == 'r' ? 1 : item[0] == 'b' ? 2 : 3);
        if (seen & bit)
            return snug_fail(err, SNUG_E_ARG, "augmentation '%s' is given twice in '%s': give each once", item, text);
        seen |= bit;
        if (!comma) return SNUG_OK;
        p = comma + 1;
    }
}

const char *snug_augment_format(const snug_augment *a, char *buf, size_t len) {
    char crop[32] = "", brightness[32] = "", contrast[32] = "";
    if (a->crop_pad) snprintf(crop, sizeof crop, ",crop:%zu", a->crop_pad);
    if (a->brightness > 0) snprintf(brightness, sizeof brightness, ",brightness:%g", (double)a->brightness);
    if (a->contrast > 0) snprintf(contrast, sizeof contrast, ",contrast:%g", (double)a->contrast);
    char all[128];
    snprintf(all, sizeof all, "%s%s%s%s", a->flip ? ",flip" : "", crop, brightness, contrast);
    snprintf(buf, len, "%s", all[0] ? all + 1 : "none"); /* all[0] is the first item's comma */
    return buf;
}
