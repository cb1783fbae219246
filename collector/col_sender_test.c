/*
 * col_sender_test.c - tests of the collector's sender against a test-local
 * aggregator: a real nng REP socket on ipc:// served by a thread that decodes
 * with rm_wire_decode, deduplicates by the (node, instance) high-water mark
 * of seqs, and counts every part it applies by seg_id. Its "database" (the
 * high-water marks, counts, applied order) survives its restarts. Checks
 * delivery in order, late and restarted aggregators, spooling, restarts of
 * the sender, corrupt spools, dead letters, commands, and input errors.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "col_sender.h"
#include "rm_test.h"
#include "banned.h"

#define MAX_SEG 4096
#define MAX_APPLIED 1024

/* ---- the test aggregator ---- */

struct tinst {
	char node[64];
	uint64_t instance, hwm;
};

struct tsrv {
	char url[320];
	nng_socket sock;
	pthread_t thread;
	atomic_int stop, running, crashed;
	pthread_mutex_t mu;
	/* the "database": survives restarts */
	struct tinst inst[8];
	int ninst;
	unsigned seg_count[MAX_SEG];
	uint64_t applied_seq[MAX_APPLIED], applied_inst[MAX_APPLIED];
	size_t napplied;
	uint64_t dups, gaps, hellos, requests;
	int first_is_hello;
	Rametr__Hello first_hello;
	char first_hello_node[64];
	uint8_t *last_batch;
	size_t last_len;
	/* behaviours */
	uint64_t reject_seq;   /* answer ACK_REJECTED to this seq */
	uint64_t swallow_seq;  /* apply it, then "crash" without replying */
	uint64_t cmd_id;       /* put this command in every ack until acked */
	int decided;            /* acks (OK, DUPLICATE) carry one decided match */
	uint64_t cmd_acked_by; /* seq of the batch that acknowledged it */
	int reject_hellos;     /* refuse this many hellos first */
	int delay_ms;
};

static struct tinst *tsrv_inst(struct tsrv *t, const char *node, uint64_t instance)
{
	int i;

	for (i = 0; i < t->ninst; i++)
		if (t->inst[i].instance == instance && strcmp(t->inst[i].node, node) == 0)
			return &t->inst[i];
	if (t->ninst == 8)
		return NULL;
	snprintf(t->inst[t->ninst].node, sizeof(t->inst[0].node), "%s", node);
	t->inst[t->ninst].instance = instance;
	t->inst[t->ninst].hwm = 0;
	return &t->inst[t->ninst++];
}

/* Handles one request; returns 0 to reply with *ack, 1 to crash silently. */
static int tsrv_handle(struct tsrv *t, const void *buf, size_t len, uint8_t **ack, size_t *acklen)
{
	Rametr__ThrottleCommand cmd = RAMETR__THROTTLE_COMMAND__INIT, *pcmd = &cmd;
	Rametr__Envelope *env = NULL;
	Rametr__Ack__Status st = RAMETR__ACK__STATUS__ACK_OK;
	struct tinst *in;
	uint64_t seq = 0;
	char err[256];
	size_t i;
	int crash = 0, give_cmd;

	if (rm_wire_decode(buf, len, &env, err, sizeof(err)) != RM_OK) {
		CU_FAIL("sender sent an undecodable message");
		return rm_wire_encode_ack(RAMETR__ACK__STATUS__ACK_MALFORMED, 0, err, NULL, 0, ack,
					  acklen) != RM_OK;
	}
	pthread_mutex_lock(&t->mu);
	if (t->requests++ == 0)
		t->first_is_hello = env->body_case == RAMETR__ENVELOPE__BODY_HELLO;
	if (env->body_case == RAMETR__ENVELOPE__BODY_HELLO && t->reject_hellos > 0) {
		t->reject_hellos--;
		st = RAMETR__ACK__STATUS__ACK_REJECTED;
		snprintf(err, sizeof(err), "node 'node-a' is not configured yet");
	} else if (env->body_case == RAMETR__ENVELOPE__BODY_HELLO) {
		if (t->hellos++ == 0) {
			t->first_hello = *env->hello;
			snprintf(t->first_hello_node, sizeof(t->first_hello_node), "%s",
				 env->hello->node);
		}
	} else if (env->body_case == RAMETR__ENVELOPE__BODY_BATCH) {
		const struct rm_wbatch *b = rm_wire_batch(env);

		seq = b->seq;
		for (i = 0; i < b->n_acked_commands; i++)
			if (t->cmd_id && b->acked_commands[i] == t->cmd_id && !t->cmd_acked_by)
				t->cmd_acked_by = seq;
		in = tsrv_inst(t, b->node, b->instance);
		CU_ASSERT_PTR_NOT_NULL_FATAL(in);
		if (seq == t->reject_seq) {
			st = RAMETR__ACK__STATUS__ACK_REJECTED;
			snprintf(err, sizeof(err), "batch %llu is not welcome", (unsigned long long)seq);
		} else if (seq <= in->hwm) {
			st = RAMETR__ACK__STATUS__ACK_DUPLICATE;
			t->dups++;
		} else {
			if (seq != in->hwm + 1)
				t->gaps++;
			in->hwm = seq;
			for (i = 0; i < b->n_parts; i++)
				if (b->parts[i].seg_id < MAX_SEG)
					t->seg_count[b->parts[i].seg_id]++;
			if (t->napplied < MAX_APPLIED) {
				t->applied_seq[t->napplied] = seq;
				t->applied_inst[t->napplied] = b->instance;
				t->napplied++;
			}
			free(t->last_batch);
			t->last_batch = malloc(len);
			memcpy(t->last_batch, buf, len);
			t->last_len = len;
			if (seq == t->swallow_seq) {
				t->swallow_seq = 0;
				crash = 1;
			}
		}
	}
	/* only in batch acks: so batch 1 is built before the command arrives */
	give_cmd = t->cmd_id && !t->cmd_acked_by && env->body_case == RAMETR__ENVELOPE__BODY_BATCH;
	pthread_mutex_unlock(&t->mu);
	rm_wire_free(env);
	if (crash)
		return 1;
	cmd.id = t->cmd_id;
	cmd.ce = "tenant-x";
	cmd.resource = "cpu";
	cmd.cap_permille = 250;
	if (t->decided && (st == RAMETR__ACK__STATUS__ACK_OK || st == RAMETR__ACK__STATUS__ACK_DUPLICATE)) {
		static uint8_t a[4] = { 127, 0, 0, 1 };
		Rametr__ThrottleMatch m = RAMETR__THROTTLE_MATCH__INIT, *pm = &m;
		Rametr__Envelope out = RAMETR__ENVELOPE__INIT;
		Rametr__Ack a_ = RAMETR__ACK__INIT;

		m.family = 2;
		m.addr.data = a;
		m.addr.len = 4;
		m.prefix = 32;
		m.cport_hi = 65535;
		m.sport_lo = m.sport_hi = 7000;
		a_.status = st;
		a_.seq = seq;
		a_.error = "";
		a_.n_commands = give_cmd ? 1 : 0;
		a_.commands = &pcmd;
		a_.n_decided = 1;
		a_.decided = &pm;
		out.version = RM_PROTO_VERSION;
		out.body_case = RAMETR__ENVELOPE__BODY_ACK;
		out.ack = &a_;
		return rm_wire_encode(&out, ack, acklen) != RM_OK;
	}
	return rm_wire_encode_ack(st, seq, st == RAMETR__ACK__STATUS__ACK_OK ? NULL : err, &pcmd,
				  give_cmd ? 1 : 0, ack, acklen) != RM_OK;
}

static void *tsrv_main(void *arg)
{
	struct tsrv *t = arg;
	uint8_t *ack;
	size_t acklen, len;
	void *buf;
	int rv;

	while (!atomic_load(&t->stop)) {
		rv = nng_recv(t->sock, &buf, &len, NNG_FLAG_ALLOC);
		if (rv == NNG_ETIMEDOUT)
			continue;
		if (rv != 0)
			break;
		if (t->delay_ms)
			usleep((useconds_t)t->delay_ms * 1000);
		rv = tsrv_handle(t, buf, len, &ack, &acklen);
		nng_free(buf, len);
		if (rv) {
			atomic_store(&t->crashed, 1);
			break;
		}
		nng_send(t->sock, ack, acklen, 0);
		free(ack);
	}
	return NULL;
}

static void tsrv_init(struct tsrv *t, const char *name)
{
	static int fini_registered;

	/* let nng reap closed sockets before the leak check at exit */
	if (!fini_registered++)
		atexit(nng_fini);
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	snprintf(t->url, sizeof(t->url), "ipc://%s/%s.sock", rm_test_tmpdir(), name);
}

static void tsrv_start(struct tsrv *t)
{
	atomic_store(&t->stop, 0);
	atomic_store(&t->crashed, 0);
	CU_ASSERT_EQUAL_FATAL(nng_rep0_open(&t->sock), 0);
	nng_socket_set_ms(t->sock, NNG_OPT_RECVTIMEO, 50);
	CU_ASSERT_EQUAL_FATAL(nng_listen(t->sock, t->url, NULL, 0), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t->thread, NULL, tsrv_main, t), 0);
	atomic_store(&t->running, 1);
}

static void tsrv_stop(struct tsrv *t)
{
	if (!atomic_load(&t->running))
		return;
	atomic_store(&t->stop, 1);
	pthread_join(t->thread, NULL);
	nng_close(t->sock);
	atomic_store(&t->running, 0);
}

static void tsrv_release(struct tsrv *t)
{
	tsrv_stop(t);
	free(t->last_batch);
	pthread_mutex_destroy(&t->mu);
}

/* Every seg id in [first, first + n) applied exactly once, nothing else. */
static void tsrv_check_parts(struct tsrv *t, unsigned first, unsigned n)
{
	unsigned i, bad = 0;

	pthread_mutex_lock(&t->mu);
	for (i = 0; i < MAX_SEG; i++) {
		unsigned want = i >= first && i < first + n ? 1 : 0;

		if (t->seg_count[i] != want) {
			if (bad++ < 5)
				fprintf(stderr, "seg %u applied %u times (expected %u)\n", i,
					t->seg_count[i], want);
		}
	}
	pthread_mutex_unlock(&t->mu);
	CU_ASSERT_EQUAL(bad, 0);
}

/* Applied seqs of instance are exactly 1..n in this order. */
static void tsrv_check_order(struct tsrv *t, uint64_t instance, uint64_t n)
{
	uint64_t next = 1;
	size_t i;

	pthread_mutex_lock(&t->mu);
	for (i = 0; i < t->napplied; i++) {
		if (t->applied_inst[i] != instance)
			continue;
		if (t->applied_seq[i] != next)
			fprintf(stderr, "applied seq %llu, expected %llu\n",
				(unsigned long long)t->applied_seq[i], (unsigned long long)next);
		CU_ASSERT_EQUAL(t->applied_seq[i], next);
		next++;
	}
	pthread_mutex_unlock(&t->mu);
	CU_ASSERT_EQUAL(next - 1, n);
}

/* ---- helpers ---- */

static void parts_make(struct rm_part *p, unsigned first, unsigned n)
{
	unsigned i;

	memset(p, 0, n * sizeof(*p));
	for (i = 0; i < n; i++) {
		p[i].seg_id = first + i;
		p[i].win = 1700000000 + i / 4;
		p[i].pid = 10;
		p[i].tid = 11 + i;
		p[i].cpu_ns = 1000 + i;
		p[i].start_ns = 5000;
		p[i].end_ns = 6000;
		memcpy(p[i].comm, "worker", 6);
		p[i].in.family = RM_AF_INET;
		p[i].in.cookie = 900 + i;
		p[i].in.lport = 80;
		p[i].in.rport = 40000 + i;
		p[i].in.laddr[0] = htonl(0x0a000001);
		p[i].in.raddr[0] = htonl(0x0a000002);
	}
}

/* Submits nbatch batches of per parts each, seg ids from first. */
static void submit_n(struct col_sender *s, unsigned first, unsigned nbatch, unsigned per)
{
	struct rm_part p[16];
	struct rm_totals w;
	unsigned b;

	CU_ASSERT_FATAL(per <= 16);
	memset(&w, 0, sizeof(w));
	for (b = 0; b < nbatch; b++) {
		parts_make(p, first + b * per, per);
		w.win = 1700000000;
		w.busy_ns = 5000;
		w.capacity_ns = 2000000000;
		CU_ASSERT_EQUAL(col_sender_submit(s, p, per, &w, 1), RM_OK);
	}
}

static void cfg_init(struct col_sender_cfg *c, const struct tsrv *t, const char *spool)
{
	static char path[512];

	memset(c, 0, sizeof(*c));
	c->url = t->url;
	c->node = "node-a";
	c->backend = "replay";
	c->hostname = "node-a.test";
	c->window_ns = 1000000000;
	c->clock_offset_ns = 123;
	c->ncpu = 4;
	c->timeout_ms = 300;
	if (spool) {
		snprintf(path, sizeof(path), "%s/%s", rm_test_tmpdir(), spool);
		c->spool_path = path;
	}
}

static long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* ---- cases ---- */

static void test_normal(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s;
	struct tsrv t;

	tsrv_init(&t, "normal");
	tsrv_start(&t);
	cfg_init(&cfg, &t, "normal.spool");
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	CU_ASSERT(col_sender_instance(s) != 0);
	submit_n(s, 1, 20, 5);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.batches_acked, 20);
	CU_ASSERT_EQUAL(st.queued, 0);
	CU_ASSERT_EQUAL(st.lost_batches, 0);
	CU_ASSERT_EQUAL(st.rejected, 0);
	CU_ASSERT_EQUAL(st.spooled, 0);
	tsrv_check_parts(&t, 1, 100);
	tsrv_check_order(&t, col_sender_instance(s), 20);
	CU_ASSERT_EQUAL(t.gaps, 0);
	/* the hello went first and said who we are */
	CU_ASSERT(t.first_is_hello);
	CU_ASSERT_STRING_EQUAL(t.first_hello_node, "node-a");
	CU_ASSERT_EQUAL(t.first_hello.instance, col_sender_instance(s));
	CU_ASSERT_EQUAL(t.first_hello.ncpu, 4);
	CU_ASSERT_EQUAL(t.first_hello.window_ns, 1000000000);
	CU_ASSERT_EQUAL(t.first_hello.clock_offset_ns, 123);
	col_sender_close(s);
	/* nothing left: the spool is removed */
	CU_ASSERT_EQUAL(file_size(cfg.spool_path), -1);
	tsrv_release(&t);
}

static void test_conversion(void)
{
	struct col_sender_cfg cfg;
	struct col_sender *s;
	struct rm_part p[3];
	struct rm_totals w[2];
	Rametr__Envelope *env = NULL;
	const Rametr__Batch *b;
	struct tsrv t;
	char err[256];

	tsrv_init(&t, "conv");
	tsrv_start(&t);
	cfg_init(&cfg, &t, NULL);
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	parts_make(p, 1, 3);
	/* comm: 16 bytes without NUL, one non-printable byte */
	memcpy(p[0].comm, "abcdefghijklmnop", 16);
	((uint8_t *)p[0].comm)[2] = 0xc3;
	/* IPv6 out tuple */
	p[0].out.family = RM_AF_INET6;
	p[0].out.cookie = 5;
	p[0].out.lport = 443;
	p[0].out.rport = 50000;
	inet_pton(AF_INET6, "2001:db8::7", p[0].out.laddr);
	inet_pton(AF_INET6, "2001:db8::8", p[0].out.raddr);
	p[0].flags = RM_PF_START | RM_PF_END;
	p[0].runq_ns = 17;
	p[0].rx_bytes = 1;
	p[0].tx_bytes = 2;
	p[0].disk_read = 3;
	p[0].disk_write = 4;
	p[0].in_seq_start = 5;
	p[0].in_seq_end = 6;
	p[0].out_seq_start = 7;
	p[0].out_seq_end = 8;
	p[0].parent_seg = 9;
	p[0].domid = 10;
	p[0].vcpu = 11;
	p[0].blocked_ns = 12;
	/* a netlink socket: family 16 goes out as 0 with its cookie */
	p[1].in.family = 16;
	/* a unix socket, and no out tuple at all */
	p[2].in.family = RM_AF_UNIX;
	memset(w, 0, sizeof(w));
	w[0].win = 1700000000;
	w[0].busy_ns = 1;
	w[0].unseg_cpu_ns = 2;
	w[0].rx_bytes = 3;
	w[0].tx_bytes = 4;
	w[0].disk_read = 5;
	w[0].disk_write = 6;
	w[0].unseg_rx = 7;
	w[0].unseg_tx = 8;
	w[0].unseg_disk_read = 9;
	w[0].unseg_disk_write = 10;
	w[0].lost_ns = 11;
	w[0].dropped_parts = 12;
	w[0].capacity_ns = 13;
	w[0].idle_ns = 14;
	w[1] = w[0];
	w[1].win++;
	CU_ASSERT_EQUAL(col_sender_submit(s, p, 3, w, 2), RM_OK);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	col_sender_close(s);
	tsrv_stop(&t);

	/* the bytes as protobuf-c reads them: a decoder independent of the encoder's field tables */
	CU_ASSERT_EQUAL_FATAL(rm_wire_decode(t.last_batch, t.last_len, &env, err, sizeof(err)), RM_OK);
	rm_wire_free(env);
	env = rametr__envelope__unpack(NULL, t.last_len, t.last_batch);
	CU_ASSERT_PTR_NOT_NULL_FATAL(env);
	b = env->batch;
	CU_ASSERT_STRING_EQUAL(b->node, "node-a");
	CU_ASSERT_STRING_EQUAL(b->backend, "replay");
	CU_ASSERT_EQUAL(b->seq, 1);
	CU_ASSERT_EQUAL(b->window_ns, 1000000000);
	CU_ASSERT_EQUAL(b->clock_offset_ns, 123);
	CU_ASSERT_EQUAL_FATAL(b->n_parts, 3);
	CU_ASSERT_STRING_EQUAL(b->parts[0]->comm, "ab?defghijklmno");
	CU_ASSERT_STRING_EQUAL(b->parts[1]->comm, "worker");
	CU_ASSERT_EQUAL(b->parts[0]->seg_id, 1);
	CU_ASSERT_EQUAL(b->parts[0]->win, 1700000000);
	CU_ASSERT_EQUAL(b->parts[0]->pid, 10);
	CU_ASSERT_EQUAL(b->parts[0]->tid, 11);
	CU_ASSERT_EQUAL(b->parts[0]->start_ns, 5000);
	CU_ASSERT_EQUAL(b->parts[0]->end_ns, 6000);
	CU_ASSERT_EQUAL(b->parts[0]->cpu_ns, 1000);
	CU_ASSERT_EQUAL(b->parts[0]->runq_ns, 17);
	CU_ASSERT_EQUAL(b->parts[0]->rx_bytes, 1);
	CU_ASSERT_EQUAL(b->parts[0]->tx_bytes, 2);
	CU_ASSERT_EQUAL(b->parts[0]->disk_read, 3);
	CU_ASSERT_EQUAL(b->parts[0]->disk_write, 4);
	CU_ASSERT_EQUAL(b->parts[0]->flags, RM_PF_START | RM_PF_END);
	CU_ASSERT_EQUAL(b->parts[0]->in_seq_start, 5);
	CU_ASSERT_EQUAL(b->parts[0]->in_seq_end, 6);
	CU_ASSERT_EQUAL(b->parts[0]->out_seq_start, 7);
	CU_ASSERT_EQUAL(b->parts[0]->out_seq_end, 8);
	CU_ASSERT_EQUAL(b->parts[0]->parent_seg, 9);
	CU_ASSERT_EQUAL(b->parts[0]->domid, 10);
	CU_ASSERT_EQUAL(b->parts[0]->vcpu, 11);
	CU_ASSERT_EQUAL(b->parts[0]->blocked_ns, 12);
	/* IPv4 in tuple */
	CU_ASSERT_PTR_NOT_NULL_FATAL(b->parts[0]->in);
	CU_ASSERT_EQUAL(b->parts[0]->in->family, RM_AF_INET);
	CU_ASSERT_EQUAL(b->parts[0]->in->cookie, 900);
	CU_ASSERT_EQUAL(b->parts[0]->in->lport, 80);
	CU_ASSERT_EQUAL(b->parts[0]->in->rport, 40000);
	CU_ASSERT_EQUAL_FATAL(b->parts[0]->in->laddr.len, 4);
	CU_ASSERT_EQUAL(memcmp(b->parts[0]->in->laddr.data, "\x0a\x00\x00\x01", 4), 0);
	CU_ASSERT_EQUAL(memcmp(b->parts[0]->in->raddr.data, "\x0a\x00\x00\x02", 4), 0);
	/* IPv6 out tuple */
	CU_ASSERT_PTR_NOT_NULL_FATAL(b->parts[0]->out);
	CU_ASSERT_EQUAL(b->parts[0]->out->family, RM_AF_INET6);
	CU_ASSERT_EQUAL_FATAL(b->parts[0]->out->raddr.len, 16);
	CU_ASSERT_EQUAL(memcmp(b->parts[0]->out->raddr.data, p[0].out.raddr, 16), 0);
	CU_ASSERT_EQUAL(b->parts[0]->out->lport, 443);
	/* other families */
	CU_ASSERT_EQUAL(b->parts[1]->in->family, 0);
	CU_ASSERT_EQUAL(b->parts[1]->in->cookie, 901);
	CU_ASSERT_EQUAL(b->parts[1]->in->laddr.len, 0);
	CU_ASSERT_EQUAL(b->parts[2]->in->family, RM_AF_UNIX);
	CU_ASSERT_EQUAL(b->parts[2]->in->laddr.len, 0);
	CU_ASSERT_PTR_NULL(b->parts[2]->out);
	/* window totals */
	CU_ASSERT_EQUAL_FATAL(b->n_windows, 2);
	CU_ASSERT_EQUAL(b->windows[0]->win, 1700000000);
	CU_ASSERT_EQUAL(b->windows[1]->win, 1700000001);
	CU_ASSERT_EQUAL(b->windows[0]->busy_ns, 1);
	CU_ASSERT_EQUAL(b->windows[0]->unseg_cpu_ns, 2);
	CU_ASSERT_EQUAL(b->windows[0]->rx_bytes, 3);
	CU_ASSERT_EQUAL(b->windows[0]->tx_bytes, 4);
	CU_ASSERT_EQUAL(b->windows[0]->disk_read, 5);
	CU_ASSERT_EQUAL(b->windows[0]->disk_write, 6);
	CU_ASSERT_EQUAL(b->windows[0]->unseg_rx, 7);
	CU_ASSERT_EQUAL(b->windows[0]->unseg_tx, 8);
	CU_ASSERT_EQUAL(b->windows[0]->unseg_disk_read, 9);
	CU_ASSERT_EQUAL(b->windows[0]->unseg_disk_write, 10);
	CU_ASSERT_EQUAL(b->windows[0]->lost_ns, 11);
	CU_ASSERT_EQUAL(b->windows[0]->dropped_parts, 12);
	CU_ASSERT_EQUAL(b->windows[0]->capacity_ns, 13);
	CU_ASSERT_EQUAL(b->windows[0]->idle_ns, 14);
	rametr__envelope__free_unpacked(env, NULL);
	tsrv_release(&t);
}

static void test_late_aggregator(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s;
	struct tsrv t;

	tsrv_init(&t, "late");
	cfg_init(&cfg, &t, "late.spool");
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK); /* no aggregator yet */
	submit_n(s, 1, 10, 4);
	CU_ASSERT_EQUAL(col_sender_flush(s, 500), RM_ETIMEDOUT);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.queued, 10);
	CU_ASSERT_EQUAL(st.batches_acked, 0);
	tsrv_start(&t);
	CU_ASSERT_EQUAL(col_sender_flush(s, 15000), RM_OK);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.batches_acked, 10);
	CU_ASSERT_EQUAL(st.queued, 0);
	tsrv_check_parts(&t, 1, 40);
	tsrv_check_order(&t, col_sender_instance(s), 10);
	CU_ASSERT(t.first_is_hello);
	col_sender_close(s);
	tsrv_release(&t);
}

static void test_restarted_aggregator(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s;
	struct tsrv t;
	int i;

	tsrv_init(&t, "restart");
	t.swallow_seq = 5; /* applies batch 5, then dies before answering */
	tsrv_start(&t);
	cfg_init(&cfg, &t, "restart.spool");
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	submit_n(s, 1, 10, 3);
	for (i = 0; i < 200 && !atomic_load(&t.crashed); i++)
		sleep_ms(25);
	CU_ASSERT_FATAL(atomic_load(&t.crashed));
	tsrv_stop(&t);
	/* more batches while it is down */
	submit_n(s, 31, 5, 3);
	sleep_ms(700);
	col_sender_stats(s, &st);
	CU_ASSERT(st.queued >= 10);
	tsrv_start(&t);
	CU_ASSERT_EQUAL(col_sender_flush(s, 15000), RM_OK);
	col_sender_stats(s, &st);
	/* batch 5 was applied but not acked: it came again and was a duplicate */
	CU_ASSERT(st.duplicates >= 1);
	CU_ASSERT(t.dups >= 1);
	CU_ASSERT(st.retries >= 1);
	CU_ASSERT_EQUAL(st.batches_acked + st.duplicates, 15);
	tsrv_check_parts(&t, 1, 45);
	tsrv_check_order(&t, col_sender_instance(s), 15);
	CU_ASSERT_EQUAL(t.gaps, 0);
	CU_ASSERT(t.hellos >= 2); /* a new hello after reconnecting */
	col_sender_close(s);
	tsrv_release(&t);
}

static void test_spooling(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s;
	struct tsrv t;

	/* every batch goes through the spool */
	tsrv_init(&t, "spool");
	t.delay_ms = 5;
	tsrv_start(&t);
	cfg_init(&cfg, &t, "spool.spool");
	cfg.mem_limit = 1;
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	submit_n(s, 1, 30, 5);
	CU_ASSERT_EQUAL(col_sender_flush(s, 15000), RM_OK);
	col_sender_stats(s, &st);
	CU_ASSERT(st.spooled >= 29);
	CU_ASSERT_EQUAL(st.batches_acked, 30);
	CU_ASSERT_EQUAL(st.spool_bytes, 0);
	CU_ASSERT_EQUAL(file_size(cfg.spool_path), 16); /* drained: header only */
	tsrv_check_parts(&t, 1, 150);
	tsrv_check_order(&t, col_sender_instance(s), 30);
	CU_ASSERT_EQUAL(t.gaps, 0);
	col_sender_close(s);
	CU_ASSERT_EQUAL(file_size(cfg.spool_path), -1);
	tsrv_release(&t);

	/* aggregator down: the oldest go to the spool, the newest stay in memory */
	tsrv_init(&t, "spool2");
	cfg_init(&cfg, &t, "spool2.spool");
	cfg.mem_limit = 1500; /* a few batches */
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	submit_n(s, 1, 40, 5);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.queued, 40);
	CU_ASSERT(st.spooled >= 30);
	CU_ASSERT(st.spooled < 40);
	CU_ASSERT(file_size(cfg.spool_path) > 16);
	tsrv_start(&t);
	CU_ASSERT_EQUAL(col_sender_flush(s, 15000), RM_OK);
	tsrv_check_parts(&t, 1, 200);
	tsrv_check_order(&t, col_sender_instance(s), 40);
	CU_ASSERT_EQUAL(t.gaps, 0);
	col_sender_close(s);
	tsrv_release(&t);
}

static void test_reopen(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *a, *b, *c;
	uint64_t ia, ib;
	struct tsrv t;

	tsrv_init(&t, "reopen");
	cfg_init(&cfg, &t, "reopen.spool");
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&a, &cfg), RM_OK);
	ia = col_sender_instance(a);
	/* a second sender on the same spool is refused */
	CU_ASSERT_EQUAL(col_sender_open(&c, &cfg), RM_EEXIST);
	CU_ASSERT_PTR_NULL(c);
	submit_n(a, 1, 8, 4);
	sleep_ms(400); /* the first batch is in flight (timing out) */
	col_sender_close(a);
	CU_ASSERT(file_size(cfg.spool_path) > 16);

	CU_ASSERT_EQUAL_FATAL(col_sender_open(&b, &cfg), RM_OK);
	ib = col_sender_instance(b);
	CU_ASSERT(ia != ib);
	col_sender_stats(b, &st);
	CU_ASSERT_EQUAL(st.queued, 8); /* counted before the aggregator can ack any */
	tsrv_start(&t);
	submit_n(b, 33, 2, 4);
	CU_ASSERT_EQUAL(col_sender_flush(b, 15000), RM_OK);
	tsrv_check_parts(&t, 1, 40);
	tsrv_check_order(&t, ia, 8);   /* old batches keep their instance and seq */
	tsrv_check_order(&t, ib, 2);
	CU_ASSERT_EQUAL(t.gaps, 0);
	/* the old ones went first */
	CU_ASSERT_EQUAL(t.applied_inst[0], ia);
	CU_ASSERT_EQUAL(t.applied_inst[8], ib);
	col_sender_close(b);
	tsrv_release(&t);
}

/* CRC-32 (IEEE, reflected, as zlib's crc32), bit by bit: the reference. */
static uint32_t ref_crc32(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	int k;

	while (n--) {
		c ^= *p++;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
	}
	return c ^ 0xffffffffu;
}

/* Every record of a spool file carries the reference CRC of its bytes; returns the records. */
static int spool_check_crcs(const char *path)
{
	static uint8_t buf[1 << 20];
	FILE *f = fopen(path, "rb");
	size_t n, off = 16;
	int records = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	CU_ASSERT_FATAL(n >= 16 && n < sizeof(buf));
	CU_ASSERT_EQUAL(ref_crc32((const uint8_t *)"123456789", 9), 0xcbf43926u);
	while (off + 8 <= n) {
		uint32_t len = (uint32_t)buf[off] | (uint32_t)buf[off + 1] << 8 |
			       (uint32_t)buf[off + 2] << 16 | (uint32_t)buf[off + 3] << 24;
		uint32_t crc = (uint32_t)buf[off + 4] | (uint32_t)buf[off + 5] << 8 |
			       (uint32_t)buf[off + 6] << 16 | (uint32_t)buf[off + 7] << 24;

		CU_ASSERT_FATAL(off + 8 + len <= n);
		CU_ASSERT_EQUAL(crc, ref_crc32(buf + off + 8, len));
		off += 8 + len;
		records++;
	}
	CU_ASSERT_EQUAL(off, n);
	return records;
}

static void test_corrupt_spool(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *a, *b;
	char log[512], bad[600], *text;
	uint64_t ia;
	struct tsrv t;
	long size;
	int fd;

	tsrv_init(&t, "corrupt");
	cfg_init(&cfg, &t, "corrupt.spool");
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&a, &cfg), RM_OK);
	ia = col_sender_instance(a);
	submit_n(a, 1, 5, 4);
	col_sender_close(a);
	size = file_size(cfg.spool_path);
	CU_ASSERT_FATAL(size > 100);
	/* the checksums are CRC-32 as zlib computes it */
	CU_ASSERT_EQUAL(spool_check_crcs(cfg.spool_path), 5);
	/* crash in the middle of writing a sixth record: a torn tail */
	fd = open(cfg.spool_path, O_WRONLY | O_APPEND);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, "\x40\x00\x00\x00\x12\x34\x56\x78\x08\x01\x1a", 11), 11);
	close(fd);

	/* the aggregator comes after the count: once it runs, batches may be
	 * acked (and leave the queue) before col_sender_stats() looks */
	rm_test_capture_start("corrupt", log, sizeof(log));
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&b, &cfg), RM_OK);
	text = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "torn record at offset"));
	free(text);
	col_sender_stats(b, &st);
	CU_ASSERT_EQUAL(st.queued, 5);
	tsrv_start(&t);
	CU_ASSERT_EQUAL(col_sender_flush(b, 15000), RM_OK);
	tsrv_check_parts(&t, 1, 20);
	tsrv_check_order(&t, ia, 5);
	col_sender_close(b);
	tsrv_release(&t);

	/* a flipped byte in the last record: its checksum fails, the 4 before survive */
	tsrv_init(&t, "corrupt2");
	cfg_init(&cfg, &t, "corrupt2.spool");
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&a, &cfg), RM_OK);
	ia = col_sender_instance(a);
	submit_n(a, 1, 5, 4);
	col_sender_close(a);
	size = file_size(cfg.spool_path);
	fd = open(cfg.spool_path, O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(pwrite(fd, "\xff", 1, size - 3), 1);
	close(fd);
	tsrv_start(&t);
	rm_test_capture_start("corrupt2", log, sizeof(log));
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&b, &cfg), RM_OK);
	text = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "checksum mismatch at offset"));
	free(text);
	CU_ASSERT_EQUAL(col_sender_flush(b, 15000), RM_OK);
	tsrv_check_parts(&t, 1, 16);
	tsrv_check_order(&t, ia, 4);
	col_sender_close(b);
	tsrv_release(&t);

	/* not a spool at all: moved aside, a new one started */
	tsrv_init(&t, "corrupt3");
	cfg_init(&cfg, &t, "corrupt3.spool");
	fd = open(cfg.spool_path, O_WRONLY | O_CREAT, 0600);
	CU_ASSERT_EQUAL(write(fd, "hello, this is a text file\n", 27), 27);
	close(fd);
	rm_test_capture_start("corrupt3", log, sizeof(log));
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&b, &cfg), RM_OK);
	text = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "is not a rametr spool"));
	free(text);
	snprintf(bad, sizeof(bad), "%s.bad", cfg.spool_path);
	CU_ASSERT_EQUAL(file_size(bad), 27);
	col_sender_stats(b, &st);
	CU_ASSERT_EQUAL(st.queued, 0);
	col_sender_close(b);
	tsrv_release(&t);
}

static void test_rejected(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s;
	Rametr__Envelope *env = NULL;
	char dead[600], log[512], *text;
	uint8_t hdr[16], rh[8], *rec;
	uint32_t n;
	struct tsrv t;
	int fd;

	tsrv_init(&t, "reject");
	t.reject_seq = 3;
	tsrv_start(&t);
	cfg_init(&cfg, &t, "reject.spool");
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	rm_test_capture_start("reject", log, sizeof(log));
	submit_n(s, 1, 5, 2);
	CU_ASSERT_EQUAL(col_sender_flush(s, 15000), RM_OK);
	text = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "aggregator refused batch 3 (ACK_REJECTED: batch 3 is not welcome)"));
	free(text);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.rejected, 1);
	CU_ASSERT_EQUAL(st.batches_acked, 4);
	CU_ASSERT_EQUAL(st.lost_batches, 0);
	CU_ASSERT_EQUAL(st.queued, 0);
	col_sender_close(s);
	/* parts of batch 3 (seg 5, 6) never applied; the sender moved on */
	pthread_mutex_lock(&t.mu);
	CU_ASSERT_EQUAL(t.seg_count[5], 0);
	CU_ASSERT_EQUAL(t.seg_count[6], 0);
	CU_ASSERT_EQUAL(t.seg_count[7], 1);
	CU_ASSERT_EQUAL(t.seg_count[10], 1);
	CU_ASSERT_EQUAL(t.napplied, 4);
	pthread_mutex_unlock(&t.mu);
	/* the dead letter holds batch 3, in the spool format */
	snprintf(dead, sizeof(dead), "%s.rejected", cfg.spool_path);
	fd = open(dead, O_RDONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(read(fd, hdr, 16), 16);
	CU_ASSERT_EQUAL(memcmp(hdr, "RMSPOOL1", 8), 0);
	CU_ASSERT_EQUAL_FATAL(read(fd, rh, 8), 8);
	n = (uint32_t)rh[0] | (uint32_t)rh[1] << 8 | (uint32_t)rh[2] << 16 | (uint32_t)rh[3] << 24;
	rec = malloc(n);
	CU_ASSERT_FATAL(rec != NULL);
	CU_ASSERT_EQUAL_FATAL(read(fd, rec, n), (ssize_t)n);
	CU_ASSERT_EQUAL(read(fd, rh, 1), 0); /* just one record */
	close(fd);
	CU_ASSERT_EQUAL_FATAL(rm_wire_decode(rec, n, &env, log, sizeof(log)), RM_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rm_wire_batch(env));
	CU_ASSERT_EQUAL(rm_wire_batch(env)->seq, 3);
	CU_ASSERT_EQUAL(rm_wire_batch(env)->parts[0].seg_id, 5);
	rm_wire_free(env);
	free(rec);
	tsrv_release(&t);
}

struct cmdrec {
	atomic_int calls;
	uint64_t id;
	uint32_t cap;
	char ce[32];
};

struct decrec {
	atomic_int calls;
	size_t n;
	uint32_t sport;
};

static void on_dec(void *arg, Rametr__ThrottleMatch *const *m, size_t n)
{
	struct decrec *r = arg;

	r->n = n;
	r->sport = n ? m[0]->sport_lo : 0;
	atomic_fetch_add(&r->calls, 1);
}

/* Ack.decided reaches on_decided with every OK ack, the Hello's included. */
static void test_decided(void)
{
	struct col_sender_cfg cfg;
	struct col_sender *s;
	struct decrec r;
	struct tsrv t;
	int calls;

	memset(&r, 0, sizeof(r));
	tsrv_init(&t, "dec");
	t.decided = 1;
	tsrv_start(&t);
	cfg_init(&cfg, &t, "dec.spool");
	cfg.on_decided = on_dec;
	cfg.decided_arg = &r;
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	submit_n(s, 1, 2, 2);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	calls = atomic_load(&r.calls);
	CU_ASSERT(calls >= 3); /* the Hello (one per connection nng made) and two batches */
	CU_ASSERT_EQUAL(r.n, 1);
	CU_ASSERT_EQUAL(r.sport, 7000);
	/* an aggregator without rules: an empty set */
	pthread_mutex_lock(&t.mu);
	t.decided = 0;
	pthread_mutex_unlock(&t.mu);
	submit_n(s, 5, 1, 2);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	CU_ASSERT_EQUAL(atomic_load(&r.calls), calls + 1);
	CU_ASSERT_EQUAL(r.n, 0);
	col_sender_close(s);
	tsrv_release(&t);
}

static int on_cmd(void *arg, const Rametr__ThrottleCommand *c)
{
	struct cmdrec *r = arg;

	r->id = c->id;
	r->cap = c->cap_permille;
	snprintf(r->ce, sizeof(r->ce), "%s", c->ce);
	atomic_fetch_add(&r->calls, 1);
	return c->id == 79 ? RM_EINVAL : RM_OK;  /* 79 is refused */
}

static void test_commands(void)
{
	struct col_sender_cfg cfg;
	struct col_sender *s;
	struct cmdrec r;
	struct tsrv t;

	memset(&r, 0, sizeof(r));
	tsrv_init(&t, "cmd");
	t.cmd_id = 77;
	tsrv_start(&t);
	cfg_init(&cfg, &t, "cmd.spool");
	cfg.on_command = on_cmd;
	cfg.cmd_arg = &r;
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	submit_n(s, 1, 1, 2);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	/* batch 1's ack carried it */
	CU_ASSERT_EQUAL(atomic_load(&r.calls), 1);
	CU_ASSERT_EQUAL(r.id, 77);
	CU_ASSERT_EQUAL(r.cap, 250);
	CU_ASSERT_STRING_EQUAL(r.ce, "tenant-x");
	CU_ASSERT_EQUAL(t.cmd_acked_by, 0);
	submit_n(s, 3, 1, 2);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	CU_ASSERT_EQUAL(t.cmd_acked_by, 2); /* batch 2 acknowledged it */
	CU_ASSERT_EQUAL(atomic_load(&r.calls), 1);
	/* the command came again in batch 2's ack (acked by then, so not here);
	 * a command repeated before it is acked is passed on only once: */
	pthread_mutex_lock(&t.mu);
	t.cmd_id = 78;
	t.cmd_acked_by = 0;
	pthread_mutex_unlock(&t.mu);
	submit_n(s, 5, 2, 2); /* batches 3 and 4: both acks carry command 78 */
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	CU_ASSERT_EQUAL(atomic_load(&r.calls), 2);
	CU_ASSERT_EQUAL(r.id, 78);
	/* a command the callback refuses is passed once and never acknowledged */
	pthread_mutex_lock(&t.mu);
	t.cmd_id = 79;
	t.cmd_acked_by = 0;
	pthread_mutex_unlock(&t.mu);
	submit_n(s, 7, 3, 2); /* batches 5, 6, 7: every ack carries command 79 */
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	CU_ASSERT_EQUAL(atomic_load(&r.calls), 3);
	CU_ASSERT_EQUAL(r.id, 79);
	CU_ASSERT_EQUAL(t.cmd_acked_by, 0);
	col_sender_close(s);
	tsrv_release(&t);
}

static void test_full(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s;
	struct rm_part p[4];
	struct tsrv t;
	char log[512], *text;
	int rv, ok = 0, full = 0, i;

	/* no spool and a tiny memory: nothing fits */
	tsrv_init(&t, "full");
	cfg_init(&cfg, &t, NULL);
	cfg.mem_limit = 1;
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	parts_make(p, 1, 4);
	rm_test_capture_start("full", log, sizeof(log));
	CU_ASSERT_EQUAL(col_sender_submit(s, p, 4, NULL, 0), RM_EFULL);
	text = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "dropping batch of 4 parts and 0 windows"));
	free(text);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.lost_batches, 1);
	CU_ASSERT_EQUAL(st.queued, 0);
	col_sender_close(s);

	/* a spool of bounded size: some fit, the rest are lost, seqs stay dense */
	cfg_init(&cfg, &t, "full.spool");
	cfg.mem_limit = 1;
	cfg.spool_limit = 1200;
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	rm_test_capture_start("full2", log, sizeof(log));
	for (i = 0; i < 10; i++) {
		parts_make(p, 1 + 4 * (unsigned)i, 4);
		rv = col_sender_submit(s, p, 4, NULL, 0);
		CU_ASSERT(rv == RM_OK || rv == RM_EFULL);
		ok += rv == RM_OK;
		full += rv == RM_EFULL;
	}
	text = rm_test_capture_end(log);
	free(text);
	CU_ASSERT(ok >= 2);
	CU_ASSERT(full >= 1);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.lost_batches, (uint64_t)full);
	CU_ASSERT_EQUAL(st.queued, (size_t)ok);
	CU_ASSERT(file_size(cfg.spool_path) <= 1200);
	tsrv_start(&t);
	CU_ASSERT_EQUAL(col_sender_flush(s, 15000), RM_OK);
	tsrv_check_order(&t, col_sender_instance(s), (uint64_t)ok);
	CU_ASSERT_EQUAL(t.gaps, 0);
	tsrv_check_parts(&t, 1, 4 * (unsigned)ok);
	col_sender_close(s);
	tsrv_release(&t);
}

static void test_bad_input(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s = (struct col_sender *)1;
	struct rm_part p[2];
	struct tsrv t;

	tsrv_init(&t, "badin");
	cfg_init(&cfg, &t, NULL);
	cfg.node = "bad node";
	CU_ASSERT_EQUAL(col_sender_open(&s, &cfg), RM_EINVAL);
	CU_ASSERT_PTR_NULL(s);
	cfg_init(&cfg, &t, NULL);
	cfg.url = "inproc://x";
	CU_ASSERT_EQUAL(col_sender_open(&s, &cfg), RM_EINVAL);
	cfg_init(&cfg, &t, NULL);
	cfg.window_ns = 0;
	CU_ASSERT_EQUAL(col_sender_open(&s, &cfg), RM_EINVAL);
	cfg_init(&cfg, &t, NULL);
	cfg.hostname = "host\nname";
	CU_ASSERT_EQUAL(col_sender_open(&s, &cfg), RM_EINVAL);
	cfg_init(&cfg, &t, NULL);
	cfg.spool_path = "/nonexistent-dir/x.spool";
	CU_ASSERT_EQUAL(col_sender_open(&s, &cfg), RM_EIO);
	CU_ASSERT_EQUAL(col_sender_open(NULL, &cfg), RM_EINVAL);

	tsrv_start(&t);
	cfg_init(&cfg, &t, NULL);
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	parts_make(p, 1, 2);
	p[1].win = 0;
	CU_ASSERT_EQUAL(col_sender_submit(s, p, 2, NULL, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(col_sender_submit(s, NULL, 2, NULL, 0), RM_EINVAL);
	CU_ASSERT_EQUAL(col_sender_submit(NULL, p, 1, NULL, 0), RM_EINVAL);
	p[1].win = 5;
	p[1].cpu_ns = RM_WIRE_ABSURD_NS + 1;
	CU_ASSERT_EQUAL(col_sender_submit(s, p, 2, NULL, 0), RM_EINVAL);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.queued, 0);
	/* nothing was queued and no seq was used: the next batch is seq 1 */
	p[1].cpu_ns = 1;
	CU_ASSERT_EQUAL(col_sender_submit(s, p, 2, NULL, 0), RM_OK);
	/* an empty batch is fine too (e.g. only a heartbeat) */
	CU_ASSERT_EQUAL(col_sender_submit(s, NULL, 0, NULL, 0), RM_OK);
	CU_ASSERT_EQUAL(col_sender_flush(s, 10000), RM_OK);
	tsrv_check_order(&t, col_sender_instance(s), 2);
	col_sender_close(s);
	col_sender_close(NULL);
	tsrv_release(&t);
}

static void test_hello_refused(void)
{
	struct col_sender_cfg cfg;
	struct col_sender_stats st;
	struct col_sender *s;
	char log[512], *text;
	struct tsrv t;

	tsrv_init(&t, "hello");
	t.reject_hellos = 2;
	tsrv_start(&t);
	cfg_init(&cfg, &t, "hello.spool");
	rm_test_capture_start("hello", log, sizeof(log));
	CU_ASSERT_EQUAL_FATAL(col_sender_open(&s, &cfg), RM_OK);
	submit_n(s, 1, 3, 2);
	/* batches wait behind the hello, which is retried until accepted */
	CU_ASSERT_EQUAL(col_sender_flush(s, 15000), RM_OK);
	text = rm_test_capture_end(log);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "refused the hello of node 'node-a': ACK_REJECTED: "
					    "node 'node-a' is not configured yet"));
	free(text);
	CU_ASSERT_EQUAL(t.reject_hellos, 0);
	CU_ASSERT_EQUAL(t.hellos, 1);
	CU_ASSERT_EQUAL(t.napplied, 3);
	col_sender_stats(s, &st);
	CU_ASSERT_EQUAL(st.rejected, 0);
	CU_ASSERT_EQUAL(st.batches_acked, 3);
	col_sender_close(s);
	tsrv_release(&t);
}

static CU_TestInfo cases[] = {
	{ "normal delivery in order", test_normal },
	{ "parts and windows are converted field by field", test_conversion },
	{ "the aggregator starts late", test_late_aggregator },
	{ "the aggregator dies mid-stream and restarts", test_restarted_aggregator },
	{ "spooling keeps seq order", test_spooling },
	{ "unacked batches survive a sender restart", test_reopen },
	{ "corrupt spool tail", test_corrupt_spool },
	{ "a rejected batch goes to the dead-letter file", test_rejected },
	{ "commands reach on_command and are acked, refused ones are not", test_commands },
	{ "decided matches reach on_decided with every ack", test_decided },
	{ "memory and spool full", test_full },
	{ "a refused hello is retried; batches wait", test_hello_refused },
	{ "bad input", test_bad_input },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_sender", cases)
