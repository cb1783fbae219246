/*
 * agg_config_test.c - the INI parser and CE rule matching, including
 * malformed files that must be refused with file:line messages.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "rm_test.h"
#include "agg_config.h"
#include "rm_err.h"

static const char good[] =
	"# demo\n"
	"[aggregator]\n"
	"listen = tcp://127.0.0.1:7600\n"
	"listen = ipc:///tmp/agg.ipc   ; second\n"
	"listen = tls+tcp://0.0.0.0:7601\n"
	"db = /tmp/x.db\n"
	"\n"
	"[metrics]\n"
	"listen = 127.0.0.1:9467\n"
	"[ce c1]\n"
	"client = 127.0.0.2\n"
	"priority = 1                  ; wins over c3\n"
	"[ce \"c2\"]\n"
	"client = 10.1.0.0/16\n"
	"client = fd00::/8\n"
	"server_port = 7000\n"
	"[ce c3]\n"
	"client = 127.0.0.0/8\n"
	"client_port = 40000-40999\n"
	"[ce guests]\n"
	"xen_domain = 3, 4\n";

static int match4(const struct agg_config *c, const char *ip, uint32_t rport, uint32_t lport)
{
	uint8_t a[4];

	inet_pton(AF_INET, ip, a);
	return agg_config_match_tuple(c, AF_INET, a, 4, rport, lport);
}

static void test_good(void)
{
	struct agg_config *c = NULL;
	uint8_t a6[16];

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(good, strlen(good), "good.ini", &c), RM_OK);
	CU_ASSERT_EQUAL(c->nlisten, 3);
	CU_ASSERT_STRING_EQUAL(c->listen[1], "ipc:///tmp/agg.ipc");
	CU_ASSERT_STRING_EQUAL(c->listen[2], "tls+tcp://0.0.0.0:7601");
	CU_ASSERT_STRING_EQUAL(c->db, "/tmp/x.db");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c->metrics_listen);
	CU_ASSERT_STRING_EQUAL(c->metrics_listen, "127.0.0.1:9467");
	{
		struct agg_config *plain = NULL;

		/* no [metrics] section: no endpoint */
		CU_ASSERT_EQUAL_FATAL(agg_config_parse("[aggregator]\n", 13, "plain.ini", &plain), RM_OK);
		CU_ASSERT_PTR_NULL(plain->metrics_listen);
		agg_config_free(plain);
	}
	CU_ASSERT_EQUAL_FATAL(c->nrules, 4);
	CU_ASSERT_STRING_EQUAL(c->rules[1].ce, "c2");
	/* first match wins, in file order */
	CU_ASSERT_EQUAL(match4(c, "127.0.0.2", 50000, 7000), 0);
	CU_ASSERT_EQUAL(match4(c, "10.1.200.3", 1234, 7000), 1);
	CU_ASSERT_EQUAL(match4(c, "10.1.200.3", 1234, 7001), -1); /* server port */
	CU_ASSERT_EQUAL(match4(c, "10.2.0.1", 1234, 7000), -1);
	CU_ASSERT_EQUAL(match4(c, "127.0.0.9", 40500, 80), 2);
	CU_ASSERT_EQUAL(match4(c, "127.0.0.9", 41000, 80), -1); /* client port */
	inet_pton(AF_INET6, "fd12::1", a6);
	CU_ASSERT_EQUAL(agg_config_match_tuple(c, AF_INET6, a6, 16, 1, 7000), 1);
	CU_ASSERT_EQUAL(agg_config_match_tuple(c, AF_INET6, a6, 4, 1, 7000), -1); /* bad length */
	CU_ASSERT_EQUAL(agg_config_match_domain(c, 4), 3);
	CU_ASSERT_EQUAL(agg_config_match_domain(c, 5), -1);
	agg_config_free(c);
}

/* Parse text with stderr captured; returns rv and the messages in buf. */
static int parse_capture(const char *text, char *buf, size_t buflen)
{
	struct agg_config *c = NULL;
	char path[300];
	int saved, fd, rv;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stderr.txt", rm_test_tmpdir());
	fflush(stderr);
	saved = dup(2);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	dup2(fd, 2);
	rv = agg_config_parse(text, strlen(text), "bad.ini", &c);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, buflen - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	CU_ASSERT_PTR_NULL(c);
	agg_config_free(c);
	return rv;
}

static void test_malformed(void)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "[ce c1]\nclient = 300.1.1.1\n", "bad.ini:2: invalid address or CIDR '300.1.1.1'" },
		{ "[ce c1]\nclient = 10.0.0.0/33\n", "bad.ini:2: invalid address or CIDR" },
		{ "key = 1\n", "bad.ini:1: key 'key' outside of any section" },
		{ "[nope]\n", "bad.ini:1: unknown section '[nope]'" },
		{ "[ce c1\n", "bad.ini:1: malformed section header" },
		{ "[ce __x]\n", "bad.ini:1: invalid CE name '__x'" },
		{ "[ce c1]\nclient_port = 9-3\n", "bad.ini:2: invalid port or range '9-3'" },
		{ "[ce c1]\nserver_port = 70000\n", "invalid port or range '70000'" },
		{ "[ce c1]\nxen_domain = 1, x\n", "bad.ini:2: invalid Xen domain id 'x'" },
		{ "[ce c1]\ncolour = blue\n", "bad.ini:2: unknown key 'colour' in [ce c1]" },
		{ "[aggregator]\nlisten = http://x\n", "must start with tcp://, tls+tcp:// or ipc://" },
		{ "[ce c1]\nclient\n", "bad.ini:2: expected 'key = value'" },
		{ "[ce c1]\n[ce c1]\n", "bad.ini:2: duplicate section [ce c1]" },
		{ "[ce c1]\nclient =\n", "bad.ini:2: empty value for 'client'" },
		{ "[aggregator]\nhorizon = 10\n", "bad.ini:2: invalid horizon '10'" },
		{ "[aggregator]\nhorizon = 10 days\n", "invalid horizon '10 days'" },
		{ "[aggregator]\nhorizon = 999us\n", "invalid horizon '999us'" },
		{ "[aggregator]\nhorizon = 61m\n", "invalid horizon '61m'" },
		{ "[aggregator]\nhorizon = -1s\n", "invalid horizon '-1s'" },
		{ "[aggregator]\nhorizon = 99999999999999999999s\n", "invalid horizon" },
		{ "[aggregator]\nmax_held = 0\n", "bad.ini:2: invalid max_held '0'" },
		{ "[retention]\n1w = 2d\n", "bad.ini:2: unknown key '1w' in [retention]" },
		{ "[retention]\n1s = 30s\n", "invalid retention '30s' for '1s'" },
		{ "[retention]\n1m = 0d\n", "invalid retention '0d' for '1m'" },
		{ "[retention]\n1h = always\n", "invalid retention 'always' for '1h'" },
		{ "[aggregator]\nmax_held = 67108865\n", "invalid max_held '67108865'" },
		{ "[throttle]\ncap = c2 db1\n", "bad.ini:2: invalid cap 'c2'" },
		{ "[throttle]\ncap = c2 db1 130%\n", "invalid cap 'c2'" },
		{ "[throttle]\ncap = c2 db1 0%\n", "invalid cap 'c2'" },
		{ "[throttle]\ncap = c2 db1 30% x\n", "invalid cap 'c2'" },
		{ "[throttle]\ncap = c9 db1 30%\n", "bad.ini:2: cap for unknown CE 'c9' (no [ce c9] section)" },
		{ "[ce c2]\n[throttle]\ncap = c2 db1 30%\ncap = c2 db1 20%\n",
		  "bad.ini:4: duplicate cap for CE 'c2' on server 'db1'" },
		{ "[throttle]\noverload = maybe\n", "invalid overload 'maybe'" },
		{ "[throttle]\nthreshold = 101%\n", "invalid threshold '101%'" },
		{ "[throttle]\nthreshold = 85\n", "invalid threshold '85'" },
		{ "[throttle]\nalpha = 0\n", "invalid alpha '0'" },
		{ "[throttle]\nalpha = 1.5\n", "invalid alpha '1.5'" },
		{ "[throttle]\ndecrease = 1\n", "invalid decrease '1'" },
		{ "[throttle]\nrelease_windows = 0\n", "invalid release_windows '0'" },
		{ "[throttle]\nlease = 2h\n", "invalid lease '2h'" },
		{ "[throttle]\nsource = kalman\n", "invalid source 'kalman' (rametr or lr)" },
		{ "[throttle]\nspeed = 3\n", "unknown key 'speed' in [throttle]" },
		{ "[metrics]\nport = 9467\n", "bad.ini:2: unknown key 'port' in [metrics]" },
		{ "[throttle]\nmin_share = 2\n", "invalid min_share '2'" },
		/* two tenants over one address range, no priority: refused at both places */
		{ "[ce a]\nclient = 10.0.0.0/8\n[ce b]\nclient = 10.1.2.0/24\n",
		  "bad.ini:3: [ce b] overlaps [ce a] at bad.ini:1 (both match clients in 10.0.0.0/8 and 10.1.2.0/24)" },
		{ "[ce a]\nclient = fd00::/8\nserver_port = 80\n[ce b]\nclient = fd00::1\nserver_port = 1-100\n",
		  "bad.ini:4: [ce b] overlaps [ce a] at bad.ini:1 (both match clients in fd00::/8 and fd00::1/128)" },
		{ "[ce a]\nxen_domain = 3, 4\n[ce b]\nxen_domain = 4\n", "[ce b] overlaps [ce a] at bad.ini:1 (both "
		  "match Xen domain 4)" },
		{ "[ce a]\nclient = 10.0.0.1\npriority = 3\n[ce b]\nclient = 10.0.0.0/8\npriority = 3\n",
		  "bad.ini:4: [ce b] overlaps [ce a]" },
		{ "[ce a]\npriority = high\n", "bad.ini:2: invalid priority 'high'" },
	};
	char buf[2048];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rv = parse_capture(bad[i].text, buf, sizeof(buf));

		CU_ASSERT_EQUAL(rv, RM_ECONFIG);
		if (!strstr(buf, bad[i].msg)) {
			fprintf(stdout, "\ncase %zu: expected '%s' in '%s'\n", i, bad[i].msg, buf);
			CU_FAIL("message");
		}
	}
}

static void test_horizon(void)
{
	static const struct {
		const char *v;
		uint64_t ns;
	} good[] = {
		{ "10s", 10000000000ULL }, { "1ms", 1000000ULL }, { "1h", 3600000000000ULL },
		{ "2m", 120000000000ULL }, { "2500 ms", 2500000000ULL }, { "1000000ns", 1000000ULL },
		{ "750000us", 750000000ULL },
	};
	struct agg_config *c = NULL;
	char text[128];
	size_t i;

	/* the defaults */
	CU_ASSERT_EQUAL_FATAL(agg_config_parse("", 0, "e.ini", &c), RM_OK);
	CU_ASSERT_EQUAL(c->horizon_ns, AGG_CONFIG_HORIZON_DEFAULT_NS);
	CU_ASSERT_EQUAL(c->horizon_ns, 10000000000ULL);
	CU_ASSERT_EQUAL(c->max_held, AGG_CONFIG_MAX_HELD_DEFAULT);
	agg_config_free(c);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), "[aggregator]\nhorizon = %s\nmax_held = %zu\n", good[i].v, i + 1);
		c = NULL;
		CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), "h.ini", &c), RM_OK);
		CU_ASSERT_EQUAL(c->horizon_ns, good[i].ns);
		CU_ASSERT_EQUAL(c->max_held, i + 1);
		agg_config_free(c);
	}
}

static void test_estimate(void)
{
	static const char ok[] =
		"[estimate db1]\nmethod = lr, kalman\nlr_windows = 12\nkalman_q = 200us\nkalman_r = 2.5e-3\n"
		"[estimate fe]\nmethod = kalman\naddress = 10.213.0.2:7001\naddress = [fd00::5]:80\n";
	static const char *const bad[] = {
		"[estimate db1]\n",                               /* no method */
		"[estimate db1]\nmethod = svm\n",                 /* unknown method */
		"[estimate db1]\nmethod = lr\nlr_windows = 1\n", /* too few */
		"[estimate db1]\nmethod = lr\nlr_windows = 5000\n",
		"[estimate db1]\nmethod = kalman\nkalman_q = 5\n", /* no unit */
		"[estimate db1]\nmethod = kalman\nkalman_r = 0\n",
		"[estimate db1]\nmethod = kalman\nkalman_r = nan\n",
		"[estimate db1]\nmethod = kalman\nkalman_r = 1e-4x\n",
		"[estimate db1]\nmethod = lr\nwindows = 3\n",     /* unknown key */
		"[estimate bad/name]\nmethod = lr\n",
		"[estimate db1]\nmethod = lr\n[estimate db1]\nmethod = kalman\n",
		"[estimate db1]\nmethod = lr\naddress = 10.0.0.1\n",       /* no port */
		"[estimate db1]\nmethod = lr\naddress = 10.0.0.1:0\n",
		"[estimate db1]\nmethod = lr\naddress = 10.0.0.1:70000\n",
		"[estimate db1]\nmethod = lr\naddress = fd00::5:80\n",     /* IPv6 needs [] */
		"[estimate db1]\nmethod = lr\naddress = [10.0.0.1]:80\n",
		"[estimate db1]\nmethod = lr\naddress = host:80\n",
		"[estimate db1]\nmethod = lr\naddress = 1.1.1.1:1\naddress = 1.1.1.1:2\naddress = 1.1.1.1:3\n"
		"address = 1.1.1.1:4\naddress = 1.1.1.1:5\naddress = 1.1.1.1:6\naddress = 1.1.1.1:7\n"
		"address = 1.1.1.1:8\naddress = 1.1.1.1:9\n",
	};
	struct agg_config *c = NULL;
	char path[300];
	size_t i;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(ok, strlen(ok), "e.ini", &c), RM_OK);
	CU_ASSERT_EQUAL_FATAL(c->nest, 2);
	CU_ASSERT_STRING_EQUAL(c->est[0].server, "db1");
	CU_ASSERT_EQUAL(c->est[0].methods, AGG_CONFIG_EST_LR | AGG_CONFIG_EST_KALMAN);
	CU_ASSERT_EQUAL(c->est[0].lr_windows, 12);
	CU_ASSERT_EQUAL(c->est[0].kalman_q_ns, 200000);
	CU_ASSERT_DOUBLE_EQUAL(c->est[0].kalman_r, 2.5e-3, 1e-12);
	CU_ASSERT_EQUAL(c->est[1].methods, AGG_CONFIG_EST_KALMAN);
	CU_ASSERT_EQUAL(c->est[1].lr_windows, AGG_CONFIG_LR_WINDOWS_DEFAULT); /* defaults */
	CU_ASSERT_EQUAL(c->est[1].kalman_q_ns, 0);
	CU_ASSERT_DOUBLE_EQUAL(c->est[1].kalman_r, AGG_CONFIG_KALMAN_R_DEFAULT, 1e-12);
	CU_ASSERT_EQUAL(c->est[0].naddr, 0);
	CU_ASSERT_EQUAL_FATAL(c->est[1].naddr, 2);
	{
		uint8_t a4[4], a6[16];

		inet_pton(AF_INET, "10.213.0.2", a4);
		inet_pton(AF_INET6, "fd00::5", a6);
		CU_ASSERT_EQUAL(agg_config_match_est_addr(c, AF_INET, a4, 4, 7001), 1);
		CU_ASSERT_EQUAL(agg_config_match_est_addr(c, AF_INET, a4, 4, 7002), -1);
		CU_ASSERT_EQUAL(agg_config_match_est_addr(c, AF_INET6, a6, 16, 80), 1);
		CU_ASSERT_EQUAL(agg_config_match_est_addr(c, AF_INET6, a6, 4, 80), -1);
		a4[3] = 3;
		CU_ASSERT_EQUAL(agg_config_match_est_addr(c, AF_INET, a4, 4, 7001), -1);
	}
	CU_ASSERT_EQUAL(agg_config_find_est(c, "fe"), 1);
	CU_ASSERT_EQUAL(agg_config_find_est(c, "nope"), -1);
	agg_config_free(c);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *log;

		c = NULL;
		rm_test_capture_start("est_bad", path, sizeof(path));
		CU_ASSERT_EQUAL(agg_config_parse(bad[i], strlen(bad[i]), "e.ini", &c), RM_ECONFIG);
		log = rm_test_capture_end(path);
		CU_ASSERT_PTR_NULL(c);
		CU_ASSERT_PTR_NOT_NULL(strstr(log, "e.ini:"));
		/* the keys of a refused section are not taken for another's */
		CU_ASSERT_PTR_NULL(strstr(log, "in [ce"));
		free(log);
	}
}

static void test_throttle(void)
{
	static const char text[] = "[ce c2]\nclient = 127.0.0.3\n[ce c3]\nclient = 127.0.0.4\n"
				   "[throttle]\ncap = c2 db1 30%\ncap = c3 db1 0.125\noverload = on\n"
				   "threshold = 90%\nalpha = 0.5\ndecrease = 0.7\nincrease = 2.5%\n"
				   "min_cap = 1%\nrelease_windows = 5\nlease = 4s\nsettle = 500ms\n"
				   "source = lr\nmin_share = 10%\n";
	struct agg_config *c = NULL;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse("[ce a]\n", 7, "d.ini", &c), RM_OK);
	CU_ASSERT_EQUAL(c->throttle.enabled, 0);
	CU_ASSERT_EQUAL(c->throttle.threshold_permille, 850);
	CU_ASSERT_DOUBLE_EQUAL(c->throttle.alpha, 0.7, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(c->throttle.decrease, 0.9, 1e-12);
	CU_ASSERT_EQUAL(c->throttle.increase_permille, 10);
	CU_ASSERT_EQUAL(c->throttle.lease_ns, 10000000000ull);
	CU_ASSERT_STRING_EQUAL(c->throttle.source, "rametr");
	CU_ASSERT_EQUAL(c->throttle.min_share_permille, 50);
	CU_ASSERT_EQUAL(agg_config_find_ce(c, "a"), 0);
	CU_ASSERT_EQUAL(agg_config_find_ce(c, "b"), -1);
	agg_config_free(c);
	CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), "t.ini", &c), RM_OK);
	CU_ASSERT_EQUAL(c->throttle.enabled, 1);
	CU_ASSERT_EQUAL_FATAL(c->throttle.ncaps, 2);
	CU_ASSERT_STRING_EQUAL(c->throttle.caps[0].ce, "c2");
	CU_ASSERT_STRING_EQUAL(c->throttle.caps[0].server, "db1");
	CU_ASSERT_EQUAL(c->throttle.caps[0].cap_permille, 300);
	CU_ASSERT_EQUAL(c->throttle.caps[1].cap_permille, 125);
	CU_ASSERT_EQUAL(c->throttle.overload, 1);
	CU_ASSERT_EQUAL(c->throttle.threshold_permille, 900);
	CU_ASSERT_DOUBLE_EQUAL(c->throttle.alpha, 0.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(c->throttle.decrease, 0.7, 1e-12);
	CU_ASSERT_EQUAL(c->throttle.increase_permille, 25);
	CU_ASSERT_EQUAL(c->throttle.min_cap_permille, 10);
	CU_ASSERT_EQUAL(c->throttle.release_windows, 5);
	CU_ASSERT_EQUAL(c->throttle.lease_ns, 4000000000ull);
	CU_ASSERT_EQUAL(c->throttle.settle_ns, 500000000ull);
	CU_ASSERT_STRING_EQUAL(c->throttle.source, "lr");
	CU_ASSERT_EQUAL(c->throttle.min_share_permille, 100);
	agg_config_free(c);
}

static void test_binary_garbage(void)
{
	char text[4096], buf[8192];
	unsigned x = 12345;
	size_t i;
	int round;

	for (round = 0; round < 200; round++) {
		for (i = 0; i < sizeof(text) - 1; i++) {
			x = x * 1103515245u + 12345u;
			text[i] = (char)((x >> 16) & 0xff);
			if (text[i] == 0)
				text[i] = '\n';
		}
		text[sizeof(text) - 1] = 0;
		/* must not crash, and answer with a defined result */
		int rv = parse_capture(text, buf, sizeof(buf));

		CU_ASSERT(rv == RM_ECONFIG || rv == RM_OK);
	}
}

static void test_load_missing(void)
{
	struct agg_config *c = (struct agg_config *)1;

	CU_ASSERT_EQUAL(agg_config_load("/nonexistent/rametr.ini", &c), RM_EIO);
	CU_ASSERT_PTR_NULL(c);
}

/* Disjoint ranges, or different ports, are no conflict; a priority decides
 * an overlap, higher first, whatever the file order. */
static void test_priority(void)
{
	static const char text[] =
		"[ce wide]\nclient = 10.0.0.0/8\n"
		"[ce web]\nclient = 10.0.0.0/8\nserver_port = 80\npriority = 5\n"
		"[ce other]\nclient = 192.168.0.0/16\n"
		"[ce db]\nclient = 10.0.0.0/8\nserver_port = 5432\npriority = 5\n"
		"[ce svc]\nserver_port = 7000\n[ce callers]\nclient_port = 7000\n"
		"[ce v6]\nclient = fd00::/8\nserver_port = 80\n[ce v6b]\nclient = fd00::1\nserver_port = 81\n";
	struct agg_config *c = NULL;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), "p.ini", &c), RM_OK);
	CU_ASSERT_STRING_EQUAL(c->rules[0].ce, "web");
	CU_ASSERT_STRING_EQUAL(c->rules[1].ce, "db");
	CU_ASSERT_STRING_EQUAL(c->rules[2].ce, "wide");
	CU_ASSERT_STRING_EQUAL(c->rules[3].ce, "other");
	CU_ASSERT_STRING_EQUAL(c->rules[match4(c, "10.9.9.9", 40000, 80)].ce, "web");
	CU_ASSERT_STRING_EQUAL(c->rules[match4(c, "10.9.9.9", 40000, 5432)].ce, "db");
	CU_ASSERT_STRING_EQUAL(c->rules[match4(c, "10.9.9.9", 40000, 22)].ce, "wide");
	CU_ASSERT_STRING_EQUAL(c->rules[match4(c, "192.168.1.1", 40000, 80)].ce, "other");
	CU_ASSERT_EQUAL(match4(c, "172.16.0.1", 40000, 80), -1);
	CU_ASSERT_STRING_EQUAL(c->rules[0].file, "p.ini");
	CU_ASSERT_EQUAL(c->rules[0].line, 3);
	agg_config_free(c);
}

/* FILE, then FILE.d/NAME.conf in byte order; messages name the drop-in. */
static void test_dropins(void)
{
	char main_path[300], dir[310], p1[400], p2[400], p3[1400], log[512];
	struct agg_config *c = NULL;
	char *out;

	snprintf(main_path, sizeof(main_path), "%s/aggregator.conf", rm_test_tmpdir());
	snprintf(dir, sizeof(dir), "%s.d", main_path);
	snprintf(p1, sizeof(p1), "%s/10-tenants.conf", dir);
	snprintf(p2, sizeof(p2), "%s/20-more.conf", dir);
	snprintf(p3, sizeof(p3), "%s/README", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
	rm_test_write_file(main_path, "[aggregator]\nlisten = tcp://127.0.0.1:7600\nlog_level = debug\n");
	rm_test_write_file(p2, "[aggregator]\ndb = /tmp/later.db\n[ce c2]\nclient = 10.2.0.0/16\n");
	rm_test_write_file(p1, "[aggregator]\ndb = /tmp/first.db\n[ce c1]\nclient = 10.1.0.0/16\n");
	rm_test_write_file(p3, "not ini at all, and not read\n");
	CU_ASSERT_EQUAL_FATAL(agg_config_load(main_path, &c), RM_OK);
	CU_ASSERT_EQUAL(c->nrules, 2);
	CU_ASSERT_STRING_EQUAL(c->rules[0].ce, "c1");
	CU_ASSERT_STRING_EQUAL(c->rules[0].file, p1);
	CU_ASSERT_STRING_EQUAL(c->db, "/tmp/later.db");
	CU_ASSERT_EQUAL(c->nlisten, 1);
	/* keys of the program's settings are handed on with their place */
	CU_ASSERT_EQUAL_FATAL(c->nsettings, 1);
	CU_ASSERT_STRING_EQUAL(c->settings[0].key, "log_level");
	CU_ASSERT_STRING_EQUAL(c->settings[0].value, "debug");
	CU_ASSERT_STRING_EQUAL(c->settings[0].file, main_path);
	CU_ASSERT_EQUAL(c->settings[0].line, 3);
	agg_config_free(c);

	/* a drop-in that overlaps a tenant of another file: both places named */
	rm_test_write_file(p2, "\n[ce c2]\nclient = 10.1.3.0/24\n");
	rm_test_capture_start("dropin", log, sizeof(log));
	CU_ASSERT_EQUAL(agg_config_load(main_path, &c), RM_ECONFIG);
	out = rm_test_capture_end(log);
	CU_ASSERT_PTR_NULL(c);
	snprintf(p3, sizeof(p3), "%s:2: [ce c2] overlaps [ce c1] at %s:3", p2, p1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, p3));
	free(out);
	/* a key before any section of a drop-in is outside of any section */
	rm_test_write_file(p2, "client = 10.1.3.0/24\n");
	rm_test_capture_start("dropin2", log, sizeof(log));
	CU_ASSERT_EQUAL(agg_config_load(main_path, &c), RM_ECONFIG);
	out = rm_test_capture_end(log);
	snprintf(p3, sizeof(p3), "%s:1: key 'client' outside of any section", p2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, p3));
	free(out);
}

static void test_retention(void)
{
	static const char text[] = "[retention]\n1s = 36h\n1m = 10d\n1d = forever\n";
	struct agg_config *c = NULL;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), "r.ini", &c), RM_OK);
	CU_ASSERT_EQUAL(c->retention_ns[0], 36 * 3600 * 1000000000LL);
	CU_ASSERT_EQUAL(c->retention_ns[1], 10 * 86400 * 1000000000LL);
	CU_ASSERT_EQUAL(c->retention_ns[2], -1); /* not given: storage's default */
	CU_ASSERT_EQUAL(c->retention_ns[3], 0);
	agg_config_free(c);
}

/* agg_config_match_socket: a part's socket from either end, rules in order;
 * a rule without clients names any address of both families; a Xen-only
 * rule names no socket. */
static void test_match_socket(void)
{
	static const char text[] = "[ce xen]\nxen_domain = 3\n"
				   "[ce db]\nclient = 10.1.0.0/16\nserver_port = 5432\n"
				   "[ce web]\nserver_port = 80\n";
	static const struct {
		const char *name, *laddr;
		uint32_t lport;
		const char *raddr;
		uint32_t rport;
		int want;
	} cases[] = {
		{ "db server side", "10.0.0.5", 5432, "10.1.2.3", 40000, 1 },
		{ "db client side", "10.1.2.3", 40000, "10.0.0.5", 5432, AGG_CONFIG_OTHER_END },
		{ "db, ipv4-mapped", "::ffff:10.0.0.5", 5432, "::ffff:10.1.2.3", 40000, 1 },
		{ "web, any ipv4 client", "10.0.0.5", 80, "192.0.2.1", 1234, 2 },
		{ "web, any ipv6 client", "fd00::5", 80, "2001:db8::1", 1234, 2 },
		{ "web client side", "2001:db8::1", 1234, "fd00::5", 80, AGG_CONFIG_OTHER_END },
		{ "no rule", "10.0.0.5", 22, "192.0.2.1", 1234, -1 },
	};
	struct agg_config *c = NULL;
	size_t i;

	CU_ASSERT_EQUAL_FATAL(agg_config_parse(text, strlen(text), "m.ini", &c), RM_OK);
	CU_ASSERT_EQUAL(c->rules[0].nmatch, 0); /* Xen-only */
	CU_ASSERT_EQUAL(c->rules[1].nmatch, 1);
	CU_ASSERT_EQUAL(c->rules[2].nmatch, 2);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t la[16] = { 0 }, ra[16] = { 0 };
		uint32_t fam = strchr(cases[i].laddr, ':') ? AF_INET6 : AF_INET;
		int got;

		inet_pton((int)fam, cases[i].laddr, la);
		inet_pton((int)fam, cases[i].raddr, ra);
		got = agg_config_match_socket(c, fam, la, cases[i].lport, ra, cases[i].rport);
		if (got != cases[i].want)
			fprintf(stderr, "%s: got %d, want %d\n", cases[i].name, got, cases[i].want);
		CU_ASSERT_EQUAL(got, cases[i].want);
	}
	agg_config_free(c);
}

static CU_TestInfo cases[] = {
	{ "[retention]: days, durations, forever, defaults", test_retention },
	{ "sockets from either end against the rules", test_match_socket },
	{ "parses a good file and matches rules in order", test_good },
	{ "refuses malformed files with file:line messages", test_malformed },
	{ "horizon and max_held: defaults, units, limits", test_horizon },
	{ "[estimate] sections: methods, parameters, errors", test_estimate },
	{ "throttle section: caps, overload rule, defaults, refusals", test_throttle },
	{ "survives binary garbage", test_binary_garbage },
	{ "missing file is an i/o error", test_load_missing },
	{ "overlapping tenants need a priority; higher wins", test_priority },
	{ "drop-ins are read in order, messages name them", test_dropins },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("agg_config", cases)
