/*
 * col_tc.c - admission throttling (col_tc.h): loads tc_police.bpf.c, owns
 * its tc hook and attachment, a token bucket per slot of its throttled-CE
 * table (col_slots.h) and the expiry thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "col_tc.h"
#include "rm_clock.h"
#include "rm_err.h"
#include "throttle.h"
#include "tc_police.skel.h"
#include "banned.h"

/* The map value of tc_police.bpf.c (its lock is not touched here). */
struct col_tc_bucket {
	uint32_t lock;
	uint32_t pad;
	uint64_t rate_bps, burst;
	int64_t tokens;
	uint64_t last_ns, passed, dropped;
};

/* What the binding report last saw of a slot's bucket (col_slots.h). */
struct col_tc_seen {
	int have_stat;
	uint64_t dropped, passed;   /* the bucket's counters at the last second's report */
};

struct col_tc {
	pthread_mutex_t mu;
	pthread_t th;
	int th_started;
	volatile int stop;
	struct tc_police_bpf *skel;
	struct bpf_tc_hook hook;
	struct bpf_tc_opts opts;
	int hook_created, attached;
	struct col_slots tab;       /* the throttled CEs and their matches */
	struct col_tc_seen seen[THR_MAX_SLOTS];
	struct col_tc_stats st;
	int64_t last_sec;     /* Unix second of the last binding report */
};

/* Caller holds mu. */
static void col_tc_release(void *arg, uint32_t si)
{
	struct col_tc *t = arg;
	struct col_tc_bucket b;

	if (!t->tab.slot[si].used)
		return;
	col_slots_clear(&t->tab, si);
	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.tc_buckets), &si, &b) == 0) {
		t->st.passed += b.passed;
		t->st.dropped += b.dropped;
	}
	memset(&b, 0, sizeof(b));
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.tc_buckets), &si, &b, BPF_ANY);
	memset(&t->seen[si], 0, sizeof(t->seen[si]));
	t->st.active--;
}

static void *col_tc_main(void *arg)
{
	struct col_tc *t = arg;
	uint32_t i;

	while (!t->stop) {
		int64_t now = rm_clock_unix_ns();

		pthread_mutex_lock(&t->mu);
		while ((i = col_slots_expired(&t->tab, now)) != 0) {
			rm_log_info("admission throttle of CE '%s' (command %" PRIu64 ") expired; "
				    "cap 0 in force at %" PRId64, t->tab.slot[i].ce, t->tab.slot[i].id, now);
			col_tc_release(t, i);
			t->st.expired++;
		}
		/* once per second: whether each bucket dropped (its cap bound) */
		if (now / 1000000000ll != t->last_sec) {
			for (i = 0; (i = col_slots_next(&t->tab, i)) != 0;) {
				const struct col_slot *s = &t->tab.slot[i];
				struct col_tc_seen *v = &t->seen[i];
				struct col_tc_bucket b;

				if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.tc_buckets), &i, &b) != 0)
					continue;
				if (t->last_sec && v->have_stat && b.dropped >= v->dropped)
					rm_log_info("CE '%s' cap %u bound %" PRIu64 " of %" PRIu64
						    " bytes in second %" PRId64, s->ce, s->cap_permille,
						    b.dropped - v->dropped,
						    b.dropped - v->dropped + b.passed - v->passed, t->last_sec);
				v->have_stat = 1;
				v->dropped = b.dropped;
				v->passed = b.passed;
			}
			t->last_sec = now / 1000000000ll;
		}
		pthread_mutex_unlock(&t->mu);
		usleep(20000);
	}
	return NULL;
}

int col_tc_apply(struct col_tc *t, const struct col_throttle_cmd *c, char *err, size_t errlen)
{
	struct col_tc_bucket b, old;
	uint32_t si;
	int rv, fresh;

	if (!t || !c)
		return RM_EINVAL;
	if ((rv = col_slots_check(c, rm_clock_unix_ns(), err, errlen)) != 0)
		return rv;
	if (c->cap_permille && c->rx_rate_bps == 0) {
		rm_errf(err, errlen, "command for CE '%s' has no inbound rate: admission throttling "
			   "needs the CE's bytes per CPU second", c->ce);
		return RM_EINVAL;
	}
	pthread_mutex_lock(&t->mu);
	si = col_slots_find(&t->tab, c->ce);
	if (c->cap_permille == 0) {
		if (si) {
			col_tc_release(t, si);
			t->st.released++;
			rm_log_info("released CE '%s', command %" PRIu64 "; cap 0 in force at %" PRId64,
				    c->ce, c->id, rm_clock_unix_ns());
		}
		pthread_mutex_unlock(&t->mu);
		return RM_OK;
	}
	fresh = !si;
	if (fresh && !(si = col_slots_unused(&t->tab, err, errlen))) {
		pthread_mutex_unlock(&t->mu);
		return RM_EFULL;
	}
	/* the bucket first, full, then the matches that lead to it */
	if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.tc_buckets), &si, &old) != 0)
		memset(&old, 0, sizeof(old));
	b = old;
	b.lock = 0;
	b.rate_bps = c->rx_rate_bps;
	b.burst = c->rx_rate_bps / 10 > COL_TC_BURST_MIN ? c->rx_rate_bps / 10 : COL_TC_BURST_MIN;
	if (fresh || b.tokens > (int64_t)b.burst)
		b.tokens = (int64_t)b.burst;
	if (fresh)
		b.last_ns = rm_clock_mono_ns();
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.tc_buckets), &si, &b, BPF_ANY);
	if ((rv = col_slots_set(&t->tab, si, c, err, errlen)) != 0) {
		old.lock = 0; /* the bucket as it was */
		bpf_map_update_elem(bpf_map__fd(t->skel->maps.tc_buckets), &si, &old, BPF_ANY);
		pthread_mutex_unlock(&t->mu);
		return rv;
	}
	if (fresh)
		t->st.active++;
	pthread_mutex_unlock(&t->mu);
	rm_log_info("admission throttling CE '%s' to %" PRIu64 " inbound bytes/s (cap %u permille), "
		    "command %" PRIu64 "; cap %u in force at %" PRId64, c->ce, c->rx_rate_bps,
		    c->cap_permille, c->id, c->cap_permille, rm_clock_unix_ns());
	return RM_OK;
}

void col_tc_stats(struct col_tc *t, struct col_tc_stats *out)
{
	struct col_tc_bucket b;
	uint32_t i;

	pthread_mutex_lock(&t->mu);
	*out = t->st;
	for (i = 0; (i = col_slots_next(&t->tab, i)) != 0;)
		if (bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.tc_buckets), &i, &b) == 0) {
			out->passed += b.passed;
			out->dropped += b.dropped;
		}
	pthread_mutex_unlock(&t->mu);
}

int col_tc_open(struct col_tc **out, const struct col_tc_cfg *cfg)
{
	struct col_tc *t;
	unsigned idx;
	int rv, err;

	if (!out || !cfg || !cfg->ifname)
		return RM_EINVAL;
	*out = NULL;
	if (!(idx = if_nametoindex(cfg->ifname))) {
		rm_log_error("failed to find interface '%s': %s", cfg->ifname, strerror(errno));
		return RM_ENOENT;
	}
	if (!(t = calloc(1, sizeof(*t))))
		return RM_ENOMEM;
	pthread_mutex_init(&t->mu, NULL);
	if (!(t->skel = tc_police_bpf__open_and_load())) {
		rm_log_error("failed to load the admission throttling program: %s", strerror(errno));
		rv = RM_EBPF;
		goto fail;
	}
	col_slots_init(&t->tab, col_slots_put_map, (void *)(intptr_t)bpf_map__fd(t->skel->maps.tc_matches));
	t->hook.sz = sizeof(t->hook);
	t->hook.ifindex = (int)idx;
	t->hook.attach_point = cfg->egress ? BPF_TC_EGRESS : BPF_TC_INGRESS;
	err = bpf_tc_hook_create(&t->hook);
	if (err && err != -EEXIST) {
		rm_log_error("failed to create the clsact hook on '%s': %s", cfg->ifname, strerror(-err));
		rv = RM_EBPF;
		goto fail;
	}
	t->hook_created = err == 0;
	t->opts.sz = sizeof(t->opts);
	t->opts.prog_fd = bpf_program__fd(t->skel->progs.tc_police);
	if ((err = bpf_tc_attach(&t->hook, &t->opts)) != 0) {
		rm_log_error("failed to attach to the tc hook of '%s': %s", cfg->ifname, strerror(-err));
		rv = RM_EBPF;
		goto fail;
	}
	t->attached = 1;
	if (pthread_create(&t->th, NULL, col_tc_main, t) != 0) {
		rv = RM_ENOMEM;
		goto fail;
	}
	t->th_started = 1;
	*out = t;
	return RM_OK;
fail:
	col_tc_close(t);
	return rv;
}

void col_tc_close(struct col_tc *t)
{
	if (!t)
		return;
	t->stop = 1;
	if (t->th_started)
		pthread_join(t->th, NULL);
	if (t->skel) {
		pthread_mutex_lock(&t->mu);
		t->st.released += col_slots_release_all(&t->tab, col_tc_release, t);
		pthread_mutex_unlock(&t->mu);
	}
	if (t->st.passed || t->st.dropped)
		rm_log_info("admission throttling: %" PRIu64 " payload bytes of throttled CEs passed, %" PRIu64
			    " dropped", t->st.passed, t->st.dropped);
	if (t->attached) {
		struct bpf_tc_opts o = { .sz = sizeof(o), .handle = t->opts.handle, .priority = t->opts.priority };

		bpf_tc_detach(&t->hook, &o);
	}
	if (t->hook_created) {
		t->hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(&t->hook);
	}
	tc_police_bpf__destroy(t->skel);
	pthread_mutex_destroy(&t->mu);
	free(t);
}
