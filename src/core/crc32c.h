/* CRC-32C (Castagnoli), the checksum of saved training state: detects truncation, flipped bits and foreign
 * bytes. The SSE4.2 instruction where the CPU has it (the build has no -march), a table elsewhere; the same
 * value either way. */
#ifndef SNUG_CORE_CRC32C_H
#define SNUG_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of the bytes that gave `crc` followed by data[0..len): start from 0, feed the parts in order.
 * crc32c_update(0, "123456789", 9) == 0xe3069283. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

#endif
