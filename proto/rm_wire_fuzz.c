/*
 * rm_wire_fuzz.c - libFuzzer target for rm_wire_decode(): any input must be
 * refused with an error text or accepted, never crash or leak; whatever is
 * accepted must re-encode, decode again, and re-encode to the same bytes,
 * and rm_wire_peek_seq() must find the batch seq in the re-encoding. The
 * same bytes as a stored part (rm_part_get()): whatever decodes re-encodes
 * to bytes that decode to the same part.
 * Built only with -DRM_FUZZ=ON and CC=clang:
 *   cmake -S . -B build-fuzz -DRM_FUZZ=ON -DCMAKE_C_COMPILER=clang
 *   make -C build-fuzz rm_wire_fuzz && build-fuzz/proto/rm_wire_fuzz -max_total_time=30
 * A seed corpus: RM_WIRE_CORPUS=<dir> proto/rm_wire_test writes one there.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rm_wire.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Rametr__Envelope *env = NULL, *env2 = NULL;
	uint8_t *b1 = NULL, *b2 = NULL;
	size_t l1, l2;
	uint64_t seq;
	char err[256];
	int rv;

	(void)rm_wire_peek_seq(data, size, &seq); /* any input: must not crash */
	{
		struct rm_wpart p, q;
		uint8_t pb[1024];
		size_t n;

		if (rm_part_get(&p, data, size) == RM_OK) {
			n = rm_part_size(&p);
			if (n > sizeof(pb) || rm_part_put(pb, &p) != pb + n || rm_part_get(&q, pb, n) != RM_OK ||
			    memcmp(&p, &q, sizeof(p)) != 0)
				abort();
		}
	}
	{
		/* protobuf-c's verdict, to compare with the fast path for batches */
		Rametr__Envelope *slow = NULL;
		uint8_t *es = NULL;
		size_t ls = 0;
		char serr[256];
		int srv;

		rm_wire_set_slow(1);
		srv = rm_wire_decode(data, size, &slow, serr, sizeof(serr));
		rm_wire_set_slow(0);
		rv = rm_wire_decode_seq(data, size, &env, &seq, err, sizeof(err));
		if (rv != srv || strcmp(err, serr) != 0)
			abort();
		if (rv == RM_OK) {
			if (rm_wire_encode(env, &b1, &l1) != RM_OK || rm_wire_encode(slow, &es, &ls) != RM_OK ||
			    l1 != ls || memcmp(b1, es, l1) != 0)
				abort();
			free(b1);
			b1 = NULL;
		}
		free(es);
		rm_wire_free(slow);
	}
	if (rv != RM_OK) {
		if (env || !err[0] || (rv != RM_EPROTO && rv != RM_EVERSION))
			abort();
		return 0;
	}
	if (!env || err[0] || rm_wire_check(env, err, sizeof(err)) != RM_OK)
		abort();
	if (env->body_case == RAMETR__ENVELOPE__BODY_BATCH && seq != env->batch->seq)
		abort();
	if (rm_wire_encode(env, &b1, &l1) != RM_OK)
		abort();
	if (rm_wire_decode(b1, l1, &env2, err, sizeof(err)) != RM_OK)
		abort();
	/* on a canonical encoding, the seq is found without decoding */
	if (env->body_case == RAMETR__ENVELOPE__BODY_BATCH &&
	    (rm_wire_peek_seq(b1, l1, &seq) != RM_OK || seq != env->batch->seq))
		abort();
	if (rm_wire_encode(env2, &b2, &l2) != RM_OK)
		abort();
	if (l1 != l2 || memcmp(b1, b2, l1) != 0)
		abort();
	free(b1);
	free(b2);
	rm_wire_free(env2);
	rm_wire_free(env);
	return 0;
}
