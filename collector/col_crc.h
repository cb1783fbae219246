/*
 * col_crc.h - CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of a byte
 * range: the checksum of every spool record (col_spool.h).
 */
#ifndef COL_CRC_H
#define COL_CRC_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 of p[0..n). Thread-safe (tables built once). */
uint32_t col_crc32(const uint8_t *p, size_t n);

#endif
