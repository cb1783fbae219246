/*
 * tb_cli.h - the start-up steps every testbed program shares: the common
 * cases of its getopt_long loop (--help, --version, a bad option), the check
 * that no operand is left after the options, and turning SIGTERM/SIGINT into
 * a readable signalfd (SIGPIPE ignored).
 */
#ifndef TB_CLI_H
#define TB_CLI_H

#include <stdio.h>

/*
 * The cases of a getopt_long loop that every testbed program handles alike,
 * for the option c that the program's own switch did not take: 'V' prints
 * prog's version on stdout and returns 0, 'h' prints usage(stdout) and
 * returns 0, anything else logs what was wrong with the option, prints
 * usage(stderr) and returns 2. The caller exits with the value returned.
 */
int tb_cli_other(int c, char **argv, const char *prog, void (*usage)(FILE *));

/*
 * After the getopt_long loop: if an operand is left, logs the first one,
 * prints usage(stderr) and returns 1; otherwise returns 0.
 */
int tb_cli_extra_args(int argc, char **argv, void (*usage)(FILE *));

/*
 * Ignores SIGPIPE, blocks SIGTERM and SIGINT in the calling thread (call it
 * before starting threads, so they inherit the mask) and returns a
 * close-on-exec signalfd that becomes readable when one arrives, or -1
 * (logged). The caller owns the descriptor.
 */
int tb_cli_signalfd(void);

#endif
