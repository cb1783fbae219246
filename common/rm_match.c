/*
 * rm_match.c - the socket matcher of rm_match.h: checks a match, masks its
 * address, and tests sockets and tuples against matches.
 */
#include <string.h>

#include "rm_addr.h"
#include "rm_err.h"
#include "rm_match.h"
#include "banned.h"

int rm_match_check(const struct rm_match *m, char *err, size_t errlen)
{
	if (m->family != 2 && m->family != 10) {
		rm_errf(err, errlen, "family %u invalid", m->family);
		return RM_EINVAL;
	}
	if (m->prefix > (m->family == 2 ? 32u : 128u)) {
		rm_errf(err, errlen, "prefix %u too long", m->prefix);
		return RM_EINVAL;
	}
	if (m->cport_lo > m->cport_hi || m->cport_hi > 65535 || m->sport_lo > m->sport_hi ||
	    m->sport_hi > 65535) {
		rm_errf(err, errlen, "bad port range");
		return RM_EINVAL;
	}
	return RM_OK;
}

void rm_match_mask(const struct rm_match *m, uint8_t addr[16], uint8_t mask[16])
{
	unsigned i, bits = m->prefix;

	memset(mask, 0, 16);
	for (i = 0; i < 16 && bits; i++) {
		unsigned b = bits >= 8 ? 8 : bits;

		mask[i] = (uint8_t)(0xff00u >> b);
		bits -= b;
	}
	if (m->family == 2)
		memset(mask + 4, 0, 12);
	for (i = 0; i < 16; i++)
		addr[i] = m->addr[i] & mask[i];
}

int rm_match_sock(const struct rm_match *m, uint32_t fam, const uint8_t *raddr, uint32_t rport,
		  uint32_t lport)
{
	if (m->family != fam || m->prefix > (fam == 2 ? 32u : 128u) || rport < m->cport_lo ||
	    rport > m->cport_hi || lport < m->sport_lo || lport > m->sport_hi)
		return 0; /* a prefix longer than the family's never matches (nor reads past it) */
	return rm_addr_prefix_eq(raddr, m->addr, m->prefix);
}

size_t rm_match_first(const struct rm_match *m, size_t n, uint32_t fam, const uint8_t *raddr,
		      uint32_t rport, uint32_t lport)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (rm_match_sock(&m[i], fam, raddr, rport, lport))
			break;
	return i;
}

int rm_match_tuple(const struct rm_match *m, size_t n, uint32_t family, const uint8_t *laddr,
		   uint32_t lport, const uint8_t *raddr, uint32_t rport, size_t *idx)
{
	uint32_t rfam, lfam;
	uint8_t ra[16], la[16];
	size_t i;

	if (family != 2 && family != 10)
		return RM_MATCH_NONE;
	rm_addr_norm(family, raddr, &rfam, ra);
	if ((i = rm_match_first(m, n, rfam, ra, rport, lport)) < n) {
		if (idx)
			*idx = i;
		return RM_MATCH_ENTRY;
	}
	rm_addr_norm(family, laddr, &lfam, la);
	if (lfam == rfam && rm_match_first(m, n, lfam, la, lport, rport) < n)
		return RM_MATCH_OTHER_END;
	return RM_MATCH_NONE;
}
