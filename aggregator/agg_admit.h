/*
 * agg_admit.h - who may report what: the admission rules the transport
 * server applies to a collector's messages before any handler sees them.
 * Pure logic: the caller passes the cluster secret, the clock reading and
 * the tolerance; nothing here reads a file, a clock or a socket.
 *
 * Enrolment token of a node: the lowercase hex HMAC-SHA256, keyed with the
 * cluster secret, of "rametr-node-v1:" followed by the node name (what
 * scripts/cert.sh issue writes to NODE.token). A node proves its name by
 * sending its token in the Hello; nng 1.5.2 cannot give the server the
 * peer's certificate, so the certificate proves cluster membership and the
 * token proves the node name.
 *
 * Window tolerance: window w of a batch with window_ns covers
 * [w * window_ns, (w + 1) * window_ns) in unix ns; it is admitted when it
 * ends no more than tol_ns before now and starts no more than tol_ns after.
 */
#ifndef AGG_ADMIT_H
#define AGG_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#include "rm_wire.h"

#define AGG_ADMIT_TOKEN_HEX 64 /* characters of a token */

/*
 * Writes node's token for secret[0..n) as AGG_ADMIT_TOKEN_HEX hex digits and
 * a NUL to out (>= AGG_ADMIT_TOKEN_HEX + 1 bytes). Returns RM_OK, RM_EINVAL
 * (NULL or empty secret or node), RM_EIO (the HMAC failed).
 */
int agg_admit_token(const uint8_t *secret, size_t n, const char *node, char *out);

/*
 * Whether token is node's token for secret[0..n) (compared in constant
 * time). Returns RM_OK; RM_EPROTO with a reason in err if it is missing or
 * wrong; RM_EINVAL for bad arguments.
 */
int agg_admit_check_token(const uint8_t *secret, size_t n, const char *node, const char *token,
			  char *err, size_t errlen);

/*
 * Whether every window of b (its parts' and its totals') lies within tol_ns
 * of now_unix_ns (tol_ns <= 0: no check). Returns RM_OK, or RM_EPROTO with
 * the first window out of tolerance, how far and which way in err.
 */
int agg_admit_windows(const struct rm_wbatch *b, int64_t now_unix_ns, int64_t tol_ns, char *err,
		      size_t errlen);

#endif
