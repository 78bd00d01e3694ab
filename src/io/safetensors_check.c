/* st_check_crc (safetensors.h): the checksum recomputed over the file with its own 8 digits read as '0'. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "io/safetensors.h"

#define FIELD "\"" ST_CRC_KEY "\":\""

static bool parse_hex8(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return s[8] == '"';
}

snug_status st_check_crc(FILE *f, const char *path, const char *header, uint64_t header_len, bool *present,
                         snug_error *err) {
    const char *field = memmem(header, header_len, FIELD, sizeof FIELD - 1);
    *present = field != NULL;
    if (!field) return SNUG_OK;
    const size_t at = (size_t)(field - header) + sizeof FIELD - 1;
    uint32_t want;
    if (at + 9 > header_len || !parse_hex8(header + at, &want))
        return snug_fail(err, SNUG_E_FORMAT, "%s: the checksum in its header is not 8 hex digits: the file is "
                         "damaged", path);
    unsigned char count[8];
    for (int i = 0; i < 8; i++) count[i] = (unsigned char)(header_len >> (8 * i));
    uint32_t crc = crc32c_update(0, count, 8);
    crc = crc32c_update(crc, header, at);
    crc = crc32c_update(crc, "00000000", 8);
    crc = crc32c_update(crc, header + at + 8, (size_t)header_len - at - 8);
    unsigned char buf[1 << 16];
    if (fseek(f, (long)(8 + header_len), SEEK_SET) != 0)
        return snug_fail(err, SNUG_E_IO, "%s: cannot seek past its header", path);
    for (size_t got; (got = fread(buf, 1, sizeof buf, f)) > 0;) crc = crc32c_update(crc, buf, got);
    if (ferror(f)) return snug_fail(err, SNUG_E_IO, "%s: read error while checking it", path);
    if (crc != want)
        return snug_fail(err, SNUG_E_FORMAT, "%s: its checksum does not match its bytes (CRC-32C %08x in the header, "
                         "%08x computed): the file is truncated, corrupted or pieced together", path, want, crc);
    return SNUG_OK;
}
