/*
 * tb_cli.c - the start-up steps every testbed program shares: the common
 * getopt_long cases, the no-operand check, and the signalfd for SIGTERM and
 * SIGINT (see tb_cli.h).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>

#include "rm_err.h"
#include "rm_version.h"
#include "tb_cli.h"
#include "banned.h"

int tb_cli_other(int c, char **argv, const char *prog, void (*usage)(FILE *))
{
	switch (c) {
	case 'V':
		rm_version_print(stdout, prog);
		return 0;
	case 'h':
		usage(stdout);
		return 0;
	default:
		if (optopt)
			rm_log_error("bad or incomplete option '-%c'", optopt);
		else
			rm_log_error("unknown option '%s'", argv[optind - 1]);
		usage(stderr);
		return 2;
	}
}

int tb_cli_extra_args(int argc, char **argv, void (*usage)(FILE *))
{
	if (optind == argc)
		return 0;
	rm_log_error("unexpected argument '%s'", argv[optind]);
	usage(stderr);
	return 1;
}

int tb_cli_signalfd(void)
{
	sigset_t mask;
	int sfd;

	/* Signals go to the signalfd only; SIGPIPE never kills us. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
		rm_log_error("failed to set up signal handling: %s", strerror(errno));
		return -1;
	}
	return sfd;
}
