/*
 * rm_addr.h - socket addresses as Rametr's rules compare them, one code for
 * the aggregator (rule matching, pairing keys) and the collector (merging
 * the parts the rules decide), so that both sides always agree.
 *
 * Pure functions, thread-safe.
 */
#ifndef RM_ADDR_H
#define RM_ADDR_H

#include <stdint.h>

/*
 * The address in (16 bytes, network order: rametr.h's laddr/raddr) of a
 * tuple of family (2 or 10, or anything else) into *fam and out (16 bytes,
 * zero-padded): an IPv4-mapped IPv6 address (::ffff:a.b.c.d) as IPv4
 * (family 2, 4 bytes); IPv4 as its 4 bytes; anything else as is.
 */
void rm_addr_norm(uint32_t family, const void *in, uint32_t *fam, uint8_t out[16]);

/* 1 if the first prefix bits of a and b are equal (prefix <= 128), else 0. */
int rm_addr_prefix_eq(const uint8_t *a, const uint8_t *b, uint32_t prefix);

#endif
