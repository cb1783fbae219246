/*
 * rm_addr.c - address normalization and prefix comparison of rm_addr.h.
 */
#include <string.h>

#include "rm_addr.h"
#include "banned.h"

void rm_addr_norm(uint32_t family, const void *in, uint32_t *fam, uint8_t out[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint8_t a[16];

	memcpy(a, in, 16);
	memset(out, 0, 16);
	if (family == 10 && memcmp(a, v4mapped, sizeof(v4mapped)) == 0) {
		*fam = 2;
		memcpy(out, a + 12, 4);
	} else if (family == 2) {
		*fam = 2;
		memcpy(out, a, 4);
	} else {
		*fam = family;
		memcpy(out, a, 16);
	}
}

int rm_addr_prefix_eq(const uint8_t *a, const uint8_t *b, uint32_t prefix)
{
	uint32_t i;

	for (i = 0; i < prefix && i < 128; i++) {
		uint8_t bit = (uint8_t)(0x80u >> (i % 8));

		if ((a[i / 8] & bit) != (b[i / 8] & bit))
			return 0;
	}
	return 1;
}
