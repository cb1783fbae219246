/*
 * rm_nng.h - closing an nng socket that dials, around a loss in nng 1.5.2
 * (Debian 12): a socket closed while its dialer's connection is still
 * negotiating loses the dialer and the half-made connection for good (about
 * 3 KB each time; nng_fini() does not get them back). The caller counts the
 * socket's attached connections in its own pipe callbacks (nng keeps one
 * callback per event and socket), and closes through this.
 */
#ifndef RM_NNG_H
#define RM_NNG_H

#include <stdatomic.h>

#include <nng/nng.h>

/* How long a close waits for a connection to attach: a negotiation on this node takes about 1 ms. */
#define RM_NNG_SETTLE_MS 250

/* Closes s once *attached (its connections attached now: +1 at NNG_PIPE_EV_ADD_POST, -1 at REM_POST if
   the caller counts that) is above 0, or after max_ms (none may be on its way: an unreachable peer).
   Blocks the calling thread meanwhile. */
void rm_nng_close_dialer(nng_socket s, const atomic_int *attached, int max_ms);

#endif
