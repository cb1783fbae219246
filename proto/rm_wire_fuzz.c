/*
 * rm_wire_fuzz.c - libFuzzer target for rm_wire_decode() and the part
 * codec: any input must be refused with an error text or accepted, never
 * crash or leak. An accepted Batch is one protobuf-c reads too, with the
 * same parts and windows (tests/rm_wire_ref.h copies protobuf-c's structs by
 * hand), each part re-encoding to bytes that decode to the same; other
 * accepted messages re-encode, decode again, and re-encode to the same
 * bytes. The same bytes as one part: the wire's decoder (rm_part_decode)
 * accepts only what the stored parts' (rm_part_get) reads the same, and
 * whatever decodes re-encodes to bytes that decode to the same part; as
 * window totals likewise.
 * Built only with -DRM_FUZZ=ON and CC=clang:
 *   cmake -S . -B build-fuzz -DRM_FUZZ=ON -DCMAKE_C_COMPILER=clang
 *   make -C build-fuzz rm_wire_fuzz && build-fuzz/proto/rm_wire_fuzz -max_total_time=30
 * A seed corpus: RM_WIRE_CORPUS=<dir> proto/rm_wire_test writes one there.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rm_wire.h"
#include "rm_wire_ref.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data as one part and as one window's totals */
static void fuzz_part(const uint8_t *data, size_t size)
{
	struct rm_wpart p, q, r;
	struct rm_totals t, u;
	uint8_t pb[1024];
	char err[256];
	size_t n;
	int rv;

	if (rm_part_get(&p, data, size) == RM_OK) {
		n = rm_part_size(&p);
		if (n > sizeof(pb) || rm_part_put(pb, &p) != pb + n || rm_part_get(&q, pb, n) != RM_OK ||
		    memcmp(&p, &q, sizeof(p)) != 0)
			abort();
	}
	rv = rm_part_decode(&r, data, size, 0, err, sizeof(err));
	if (rv != RM_OK && (rv != RM_EPROTO && rv != RM_EINVAL))
		abort();
	if (rv == RM_OK) {
		/* what the wire takes, the stored form reads the same, and it re-encodes */
		if (rm_part_get(&p, data, size) != RM_OK || memcmp(&p, &r, sizeof(p)) != 0 ||
		    rm_part_check(&r, 0, err, sizeof(err)) != RM_OK)
			abort();
		n = rm_part_size(&r);
		if (n > sizeof(pb) || rm_part_put(pb, &r) != pb + n ||
		    rm_part_decode(&q, pb, n, 0, err, sizeof(err)) != RM_OK || memcmp(&q, &r, sizeof(q)) != 0)
			abort();
	}
	if (rm_totals_decode(&t, data, size, 0, err, sizeof(err)) == RM_OK) {
		n = rm_totals_size(&t);
		if (n > sizeof(pb) || rm_totals_put(pb, &t) != pb + n ||
		    rm_totals_decode(&u, pb, n, 0, err, sizeof(err)) != RM_OK || memcmp(&t, &u, sizeof(t)) != 0)
			abort();
	}
}

/* An accepted batch: protobuf-c reads the same (it is the reference), each part re-encodes. */
static void fuzz_batch(const uint8_t *data, size_t size, const struct rm_wbatch *wb, uint64_t seq)
{
	Rametr__Envelope *u = rametr__envelope__unpack(NULL, size, data);
	struct rm_wpart want, again;
	struct rm_totals w;
	uint8_t pb[1024];
	char err[256];
	size_t i, n;

	if (!u || u->body_case != RAMETR__ENVELOPE__BODY_BATCH || seq != wb->seq || u->batch->seq != wb->seq ||
	    u->batch->instance != wb->instance || strcmp(u->batch->node, wb->node) != 0 ||
	    u->batch->n_parts != wb->n_parts || u->batch->n_windows != wb->n_windows ||
	    u->batch->n_acked_commands != wb->n_acked_commands)
		abort();
	for (i = 0; i < wb->n_parts; i++) {
		rm_ref_part_in(&want, u->batch->parts[i]);
		n = rm_part_size(&wb->parts[i]);
		if (memcmp(&want, &wb->parts[i], sizeof(want)) != 0 || n > sizeof(pb))
			abort();
		rm_part_put(pb, &wb->parts[i]);
		if (rm_part_decode(&again, pb, n, i, err, sizeof(err)) != RM_OK ||
		    memcmp(&again, &wb->parts[i], sizeof(again)) != 0)
			abort();
	}
	for (i = 0; i < wb->n_windows; i++) {
		rm_ref_totals_in(&w, u->batch->windows[i]);
		if (memcmp(&w, &wb->windows[i], sizeof(w)) != 0)
			abort();
	}
	for (i = 0; i < wb->n_acked_commands; i++)
		if (u->batch->acked_commands[i] != wb->acked_commands[i])
			abort();
	rametr__envelope__free_unpacked(u, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Rametr__Envelope *env = NULL, *env2 = NULL;
	uint8_t *b1 = NULL, *b2 = NULL;
	size_t l1, l2;
	uint64_t seq;
	char err[256];
	int rv;

	(void)rm_wire_peek_seq(data, size, &seq); /* any input: must not crash */
	fuzz_part(data, size);
	rv = rm_wire_decode_seq(data, size, &env, &seq, err, sizeof(err));
	if (rv != RM_OK) {
		if (env || !err[0] || (rv != RM_EPROTO && rv != RM_EVERSION))
			abort();
		return 0;
	}
	if (!env || err[0])
		abort();
	if (rm_wire_batch(env)) {
		fuzz_batch(data, size, rm_wire_batch(env), seq);
		rm_wire_free(env);
		return 0;
	}
	if (rm_wire_check(env, err, sizeof(err)) != RM_OK || rm_wire_encode(env, &b1, &l1) != RM_OK)
		abort();
	if (rm_wire_decode(b1, l1, &env2, err, sizeof(err)) != RM_OK)
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
