/*
 * crc32c.h — CRC-32C (Castagnoli), as Kafka's RecordBatch v2 uses.
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it, a slicing-by-8 table otherwise.
 * Both produce the same value; tests check them against published vectors. Thread-safe.
 */
#ifndef ST_BASE_CRC32C_H
#define ST_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over n bytes. */
uint32_t st_crc32c(uint32_t crc, const void *data, size_t n);
/* The portable table path, exposed so tests can compare both paths. */
uint32_t st_crc32c_sw(uint32_t crc, const void *data, size_t n);

#endif
