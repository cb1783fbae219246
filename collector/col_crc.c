/*
 * col_crc.c - CRC-32 (IEEE 802.3, reflected, as zlib's crc32), slicing-by-8.
 * Owns its eight tables, built once.
 */
#include <pthread.h>

#include "col_crc.h"
#include "banned.h"

/*
 * Slicing-by-8: eight bytes per step through eight tables (table k: the CRC
 * of a byte followed by k zero bytes). Batches are spooled whenever the
 * aggregator lags, and read back; byte-at-a-time was ~10% of the
 * collector's CPU then.
 */
static uint32_t col_crc_table[8][256];
static pthread_once_t col_crc_once = PTHREAD_ONCE_INIT;

static void col_crc_init(void)
{
	uint32_t c, i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		col_crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			col_crc_table[k][i] = (col_crc_table[k - 1][i] >> 8) ^
					      col_crc_table[0][col_crc_table[k - 1][i] & 0xff];
}

uint32_t col_crc32(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu, lo, hi;

	pthread_once(&col_crc_once, col_crc_init);
	while (n >= 8) {
		lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			  (uint32_t)p[3] << 24);
		hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		c = col_crc_table[7][lo & 0xff] ^ col_crc_table[6][(lo >> 8) & 0xff] ^
		    col_crc_table[5][(lo >> 16) & 0xff] ^ col_crc_table[4][lo >> 24] ^
		    col_crc_table[3][hi & 0xff] ^ col_crc_table[2][(hi >> 8) & 0xff] ^
		    col_crc_table[1][(hi >> 16) & 0xff] ^ col_crc_table[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = col_crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

