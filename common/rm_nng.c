/*
 * rm_nng.c - closing an nng socket that dials once no connection of it is
 * negotiating (rm_nng.h says why).
 */
#include "rm_nng.h"

#include <nng/supplemental/util/platform.h>

#include "banned.h"

void rm_nng_close_dialer(nng_socket s, const atomic_int *attached, int max_ms)
{
	int ms;

	for (ms = 0; ms < max_ms && atomic_load(attached) <= 0; ms++)
		nng_msleep(1);
	nng_close(s);
}
