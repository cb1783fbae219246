/*
 * agg_config_fuzz.c - libFuzzer target for the INI parser and rule matcher:
 * any input must parse or be refused, never crash, and a parsed config must
 * answer matches for arbitrary addresses.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "agg_config.h"
#include "rm_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agg_config *c = NULL;

	rm_log_set_verbose(-1); /* the parser reports every problem; keep libFuzzer's output readable */
	if (agg_config_parse((const char *)data, size, "fuzz", &c) == RM_OK) {
		uint8_t a[16] = { 127, 0, 0, 2 };

		(void)agg_config_match_tuple(c, 2, a, 4, 40000, 7000);
		(void)agg_config_match_tuple(c, 10, a, 16, 1, 2);
		(void)agg_config_match_domain(c, 3);
		agg_config_free(c);
	}
	return 0;
}
