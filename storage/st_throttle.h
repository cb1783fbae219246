/*
 * st_throttle.h - throttle commands and the decisions behind them,
 * stored beside the accounting tables: who asked (a policy rule or an
 * operator), when, why, the figures it looked at, and what became of the
 * command.
 *
 * States of a command:
 *   requested   written by rametrctl; the aggregator has not checked it yet
 *   refused     the aggregator refused it (error says why: unknown CE,
 *               unknown server, expired, duplicate, ...)
 *   pending     accepted; goes out with the next Ack to the server's collector
 *   sent        in an Ack to the collector
 *   applied     the collector acknowledged it (Batch.acked_commands)
 *   superseded  a newer command for the same (server, CE, resource) replaced
 *               it before it expired
 *   expired     its expiry passed (the collector has dropped it by itself)
 *
 * Thread safety: as st.h (one handle per thread).
 */
#ifndef RM_ST_THROTTLE_H
#define RM_ST_THROTTLE_H

#include <stddef.h>
#include <stdint.h>

#include "st.h"

#define ST_THR_WHO_MAX 63
#define ST_THR_TEXT_MAX 255
#define ST_THR_STATE_MAX 15

struct st_throttle {
	uint64_t id;                  /* > 0; the command id on the wire */
	int64_t created_ns;           /* Unix ns */
	int64_t updated_ns;           /* last change of state */
	int64_t expires_ns;           /* Unix ns */
	char who[ST_THR_WHO_MAX + 1];           /* "policy:cap", "policy:overload", "rametrctl:<user>" */
	char server[ST_NAME_MAX + 1];
	char ce[ST_NAME_MAX + 1];
	char resource[16];                      /* "cpu" */
	uint32_t cap_permille;                  /* 0 = release */
	char why[ST_THR_TEXT_MAX + 1];
	char figures[ST_THR_TEXT_MAX + 1];      /* "key=value ..." the decision looked at */
	char state[ST_THR_STATE_MAX + 1];
	char error[ST_THR_TEXT_MAX + 1];        /* reason of a refusal */
};

/*
 * Stores a new command. t->id 0: a new id is assigned (greater than every
 * id stored) and written back. Returns RM_OK; RM_EINVAL (empty or too long
 * names, unknown state, cap > 1000: logged); RM_EEXIST (the id exists);
 * RM_ESQL / RM_EIO.
 */
int st_throttle_add(st_db *db, struct st_throttle *t);

/* Changes the state (and error, may be NULL) of command id at time now.
 * RM_OK, RM_ENOENT, RM_EINVAL, RM_ESQL. */
int st_throttle_set_state(st_db *db, uint64_t id, const char *state, const char *error, int64_t now);

/* Reads command id. RM_OK, RM_ENOENT, RM_ESQL. */
int st_throttle_get(st_db *db, uint64_t id, struct st_throttle *out);

struct st_throttle_query {
	const char *state;     /* NULL = any; "active" = pending, sent or applied */
	const char *server;    /* NULL = any */
	const char *ce;        /* NULL = any */
	int64_t since_ns;      /* created at or after; 0 = any */
	size_t limit;          /* 0 = no limit; newest first when set */
};

/*
 * Commands matching q, oldest first (newest first with a limit), in a new
 * array (*rows, free() it) of *n entries. RM_OK, RM_EINVAL, RM_ESQL,
 * RM_ENOMEM.
 */
int st_throttle_list(st_db *db, const struct st_throttle_query *q, struct st_throttle **rows, size_t *n);

/* 1 if state is one of the states above. */
int st_throttle_state_valid(const char *state);

/* The v4 migration step (creates the throttle table); used by st_schema.c. */
extern const char st_throttle_schema[];

#endif
