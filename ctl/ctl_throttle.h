/*
 * ctl_throttle.h - 'rametrctl throttle list|set|clear': the throttle
 * commands stored by the aggregator (st_throttle.h) and operator commands
 * written for the aggregator to check and send.
 */
#ifndef CTL_THROTTLE_H
#define CTL_THROTTLE_H

/* Runs 'throttle' with argv[0] = "throttle". Returns the exit code: 0 ok,
 * 1 failure (database, a command refused or not picked up), 2 bad arguments. */
int ctl_throttle_main(int argc, char **argv);

#endif
