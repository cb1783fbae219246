/*
 * agg_main.c - the rametr-aggregator program: reads the configuration,
 * opens storage, and serves collectors until SIGINT/SIGTERM. Wires
 * transport (agg_server) -> stitcher -> accountant -> storage.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_account.h"
#include "agg_config.h"
#include "agg_server.h"
#include "agg_stitch.h"
#include "rm_err.h"
#include "st.h"
#include "banned.h"

static volatile sig_atomic_t agg_stop;

static void agg_on_signal(int sig)
{
	(void)sig;
	agg_stop = 1;
}

static int agg_on_hello(void *arg, const Rametr__Hello *h, char *err, size_t errlen)
{
	return agg_stitch_hello(arg, h, err, errlen);
}

static int agg_on_batch(void *arg, const Rametr__Batch *b, int *duplicate, char *err, size_t errlen)
{
	return agg_stitch_batch(arg, b, duplicate, err, errlen);
}

static void agg_usage(FILE *f)
{
	fprintf(f,
		"usage: rametr-aggregator --config FILE [--db PATH] [--listen URL]... [-v]\n"
		"\n"
		"Receives segment batches from collectors, attributes them to chargeable\n"
		"entities by the rules in FILE, and stores U_c, V and U per window in SQLite.\n"
		"  --config FILE   INI configuration ([aggregator] listen/db, [ce NAME] rules)\n"
		"  --db PATH       SQLite file (overrides the config's db)\n"
		"  --listen URL    tcp://HOST:PORT or ipc:///PATH (repeatable; overrides the config)\n"
		"  -v, --verbose   debug messages\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "db", required_argument, NULL, 'd' },
		{ "listen", required_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *db_path = NULL, *listen[16];
	struct agg_config *cfg = NULL;
	struct agg_account *acct = NULL;
	struct agg_stitch *stitch = NULL;
	struct agg_server *srv = NULL;
	struct agg_account_stats st;
	struct sigaction sa;
	st_db *db = NULL;
	size_t nlisten = 0, i;
	int c, rv;

	rm_log_init("rametr-aggregator");
	while ((c = getopt_long(argc, argv, "c:d:l:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'd': db_path = optarg; break;
		case 'l':
			if (nlisten == sizeof(listen) / sizeof(listen[0])) {
				rm_log_error("too many --listen addresses");
				return 2;
			}
			listen[nlisten++] = optarg;
			break;
		case 'v': rm_log_set_verbose(1); break;
		case 'h': agg_usage(stdout); return 0;
		default: agg_usage(stderr); return 2;
		}
	}
	if (!config || optind != argc) {
		agg_usage(stderr);
		return 2;
	}
	if ((rv = agg_config_load(config, &cfg)) != 0) {
		rm_log_error("failed to load configuration '%s': %s", config, rm_strerror(rv));
		return rv == RM_ECONFIG ? 2 : 1;
	}
	if (!db_path)
		db_path = cfg->db ? cfg->db : "/var/lib/rametr/rametr.db";
	if (nlisten == 0)
		for (i = 0; i < cfg->nlisten && nlisten < sizeof(listen) / sizeof(listen[0]); i++)
			listen[nlisten++] = cfg->listen[i];
	if (nlisten == 0)
		listen[nlisten++] = "tcp://127.0.0.1:7600";

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = agg_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	rv = st_open(&db, db_path, 0);
	if (rv == RM_OK)
		rv = agg_account_open(&acct, db);
	if (rv == RM_OK)
		rv = agg_stitch_open(&stitch, cfg, acct);
	if (rv == RM_OK) {
		struct agg_handler h = {
			.arg = stitch,
			.on_hello = agg_on_hello,
			.on_batch = agg_on_batch,
		};

		rv = agg_server_open(&srv, listen, nlisten, &h, 1000);
	}
	if (rv == RM_OK) {
		for (i = 0; i < nlisten; i++)
			rm_log_info("listening on %s, storing to '%s', %zu CE rules", listen[i], db_path, cfg->nrules);
		rv = agg_server_run(srv, &agg_stop);
	}
	if (acct) {
		agg_account_get_stats(acct, &st);
		rm_log_info("applied %llu batches (%llu duplicates ignored, %llu gaps), %llu parts",
			    (unsigned long long)st.batches, (unsigned long long)st.duplicates,
			    (unsigned long long)st.gaps, (unsigned long long)st.charges);
	}
	agg_server_close(srv);
	agg_stitch_close(stitch);
	agg_account_close(acct);
	st_close(db);
	agg_config_free(cfg);
	if (rv != RM_OK) {
		rm_log_error("stopped: %s", rm_strerror(rv));
		return 1;
	}
	return 0;
}
