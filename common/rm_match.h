/*
 * rm_match.h - the one socket matcher of Rametr: which sockets a CE's
 * configuration rule names, decided the same way by the aggregator (rules,
 * pairing), the collector's part merger (the sockets the aggregator
 * decides) and both throttle mechanisms (the sockets of a throttled CE).
 *
 * A match names the inbound sockets whose remote end is in addr/prefix,
 * whose remote (client) port is in [cport_lo, cport_hi] and whose local
 * (server) port is in [sport_lo, sport_hi]. On the wire it travels as
 * rametr.proto's ThrottleMatch (in Ack.decided and ThrottleCommand.match).
 *
 * Addresses are compared as rm_addr.h normalises them: an IPv4-mapped IPv6
 * address is IPv4.
 *
 * Pure functions, thread-safe.
 */
#ifndef RM_MATCH_H
#define RM_MATCH_H

#include <stddef.h>
#include <stdint.h>

struct rm_match {
	uint32_t family;                /* 2 = AF_INET, 10 = AF_INET6 */
	uint8_t addr[16];               /* network order; AF_INET uses the first 4 bytes */
	uint32_t prefix;                /* 0..32 / 0..128 */
	uint32_t cport_lo, cport_hi;    /* remote (client) port range, 0..65535 */
	uint32_t sport_lo, sport_hi;    /* local (server) port range, 0..65535 */
};

/*
 * RM_OK if m is well formed (family 2 or 10, prefix within it, port ranges
 * within 0..65535 with lo <= hi); else RM_EINVAL with the reason in err
 * ("family 3 invalid", "prefix 33 too long", "bad port range").
 */
int rm_match_check(const struct rm_match *m, char *err, size_t errlen);

/*
 * m's address masked to its prefix into addr (16 bytes) and the mask into
 * mask (16 bytes); for AF_INET, bytes 4..15 of both are 0.
 */
void rm_match_mask(const struct rm_match *m, uint8_t addr[16], uint8_t mask[16]);

/*
 * 1 if m names the inbound socket whose remote end is raddr:rport (family
 * fam, normalised as rm_addr_norm() does; 4 bytes read for AF_INET, 16 for
 * AF_INET6) and whose local port is lport; else 0. A match whose prefix
 * is longer than its family's names nothing.
 */
int rm_match_sock(const struct rm_match *m, uint32_t fam, const uint8_t *raddr, uint32_t rport,
		  uint32_t lport);

/* Index of the first of m[0..n) that names the socket (as rm_match_sock), or n if none. */
size_t rm_match_first(const struct rm_match *m, size_t n, uint32_t fam, const uint8_t *raddr,
		      uint32_t rport, uint32_t lport);

#define RM_MATCH_NONE 0       /* no match names the socket from either end */
#define RM_MATCH_ENTRY 1      /* a match names it as received: a CE's entry */
#define RM_MATCH_OTHER_END 2  /* a match names it seen from its other end: the CE's own client */

/*
 * What m[0..n) say of the socket of a segment part: family (2 or 10;
 * anything else is RM_MATCH_NONE) with the local end laddr:lport and the
 * remote end raddr:rport (16-byte addresses as rametr.h's tuples carry
 * them). RM_MATCH_ENTRY, with the index of the first match in *idx (if idx
 * is not NULL), when a match names the socket itself; else
 * RM_MATCH_OTHER_END when a match names it with its ends swapped (and both
 * ends have the same family after normalisation); else RM_MATCH_NONE.
 */
int rm_match_tuple(const struct rm_match *m, size_t n, uint32_t family, const uint8_t *laddr,
		   uint32_t lport, const uint8_t *raddr, uint32_t rport, size_t *idx);

#endif
