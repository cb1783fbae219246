/*
 * st_throttle.c - the throttle table (st_throttle.h): one row per command,
 * its decision's who / why / figures, and its state. Statements are
 * prepared per call: commands are rare (a few per window at most).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_err.h"
#include "st_int.h"
#include "st_throttle.h"
#include "banned.h"

const char st_throttle_schema[] =
	"CREATE TABLE throttle ("
	"  id INTEGER PRIMARY KEY CHECK (id > 0),"
	"  created INTEGER NOT NULL, updated INTEGER NOT NULL, expires INTEGER NOT NULL,"
	"  who TEXT NOT NULL, server TEXT NOT NULL, ce TEXT NOT NULL, resource TEXT NOT NULL,"
	"  cap_permille INTEGER NOT NULL CHECK (cap_permille BETWEEN 0 AND 1000),"
	"  why TEXT NOT NULL, figures TEXT NOT NULL, state TEXT NOT NULL, error TEXT NOT NULL);"
	"CREATE INDEX throttle_by_state ON throttle (state, server);";

static const char *const st_thr_states[] = { "requested", "refused", "pending", "sent",
					     "applied", "superseded", "expired" };

int st_throttle_state_valid(const char *state)
{
	size_t i;

	for (i = 0; state && i < sizeof(st_thr_states) / sizeof(st_thr_states[0]); i++)
		if (strcmp(state, st_thr_states[i]) == 0)
			return 1;
	return 0;
}

static int st_thr_text(const char *what, const char *s, size_t max)
{
	if (s && strlen(s) > max) {
		rm_log_error("%s of %zu bytes (at most %zu)", what, strlen(s), max);
		return RM_EINVAL;
	}
	return RM_OK;
}

static int st_thr_prepare(st_db *db, const char *sql, sqlite3_stmt **s, const char *what)
{
	int rc = sqlite3_prepare_v2(db->h, sql, -1, s, NULL);

	if (rc != SQLITE_OK)
		return st_sql_err(db, rc, what);
	return RM_OK;
}

int st_throttle_add(st_db *db, struct st_throttle *t)
{
	sqlite3_stmt *s;
	int rv, rc;

	if (!db || !t)
		return RM_EINVAL;
	if (db->flags & ST_OPEN_READONLY) {
		rm_log_error("failed to write to '%s': opened read-only", db->path);
		return RM_EINVAL;
	}
	if ((rv = st_check_name("server", t->server, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_name("CE", t->ce, ST_NAME_MAX)) != 0 ||
	    (rv = st_check_name("resource", t->resource, 15)) != 0 ||
	    (rv = st_check_name("who", t->who, ST_THR_WHO_MAX)) != 0)
		return rv;
	if (!st_throttle_state_valid(t->state) || t->cap_permille > 1000) {
		rm_log_error("invalid throttle command (state '%s', cap %u)", t->state, t->cap_permille);
		return RM_EINVAL;
	}
	if ((rv = st_thr_prepare(db,
				 "INSERT INTO throttle (id, created, updated, expires, who, server, ce,"
				 " resource, cap_permille, why, figures, state, error) VALUES"
				 " (CASE WHEN ?1 = 0 THEN (SELECT coalesce(max(id), 0) + 1 FROM throttle)"
				 "  ELSE ?1 END, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
				 " RETURNING id",
				 &s, "failed to write to")) != 0)
		return rv;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)t->id);
	sqlite3_bind_int64(s, 2, t->created_ns);
	sqlite3_bind_int64(s, 3, t->expires_ns);
	sqlite3_bind_text(s, 4, t->who, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, t->server, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 6, t->ce, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 7, t->resource, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 8, t->cap_permille);
	sqlite3_bind_text(s, 9, t->why, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 10, t->figures, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 11, t->state, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 12, t->error, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		t->id = (uint64_t)sqlite3_column_int64(s, 0);
		t->updated_ns = t->created_ns;
		rc = sqlite3_step(s);
	}
	if (rc != SQLITE_DONE)
		rv = (rc & 0xff) == SQLITE_CONSTRAINT ? RM_EEXIST : st_sql_err(db, rc, "failed to write to");
	sqlite3_finalize(s);
	return rv;
}

int st_throttle_set_state(st_db *db, uint64_t id, const char *state, const char *error, int64_t now)
{
	sqlite3_stmt *s;
	int rv, rc;

	if (!db || !st_throttle_state_valid(state) || st_thr_text("error", error, ST_THR_TEXT_MAX))
		return RM_EINVAL;
	if ((rv = st_thr_prepare(db, "UPDATE throttle SET state = ?2, error = coalesce(?3, error),"
				     " updated = ?4 WHERE id = ?1", &s, "failed to write to")) != 0)
		return rv;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	sqlite3_bind_text(s, 2, state, -1, SQLITE_STATIC);
	if (error)
		sqlite3_bind_text(s, 3, error, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, now);
	rc = sqlite3_step(s);
	if (rc != SQLITE_DONE)
		rv = st_sql_err(db, rc, "failed to write to");
	else if (sqlite3_changes(db->h) == 0)
		rv = RM_ENOENT;
	sqlite3_finalize(s);
	return rv;
}

static void st_thr_row(sqlite3_stmt *s, struct st_throttle *t)
{
	memset(t, 0, sizeof(*t));
	t->id = (uint64_t)sqlite3_column_int64(s, 0);
	t->created_ns = sqlite3_column_int64(s, 1);
	t->updated_ns = sqlite3_column_int64(s, 2);
	t->expires_ns = sqlite3_column_int64(s, 3);
	snprintf(t->who, sizeof(t->who), "%s", st_col_text(s, 4));
	snprintf(t->server, sizeof(t->server), "%s", st_col_text(s, 5));
	snprintf(t->ce, sizeof(t->ce), "%s", st_col_text(s, 6));
	snprintf(t->resource, sizeof(t->resource), "%s", st_col_text(s, 7));
	t->cap_permille = (uint32_t)sqlite3_column_int64(s, 8);
	snprintf(t->why, sizeof(t->why), "%s", st_col_text(s, 9));
	snprintf(t->figures, sizeof(t->figures), "%s", st_col_text(s, 10));
	snprintf(t->state, sizeof(t->state), "%s", st_col_text(s, 11));
	snprintf(t->error, sizeof(t->error), "%s", st_col_text(s, 12));
}

#define ST_THR_COLS "id, created, updated, expires, who, server, ce, resource, cap_permille," \
		    " why, figures, state, error"

int st_throttle_get(st_db *db, uint64_t id, struct st_throttle *out)
{
	sqlite3_stmt *s;
	int rv, rc;

	if (!db || !out)
		return RM_EINVAL;
	if ((rv = st_thr_prepare(db, "SELECT " ST_THR_COLS " FROM throttle WHERE id = ?1", &s,
				 "failed to read from")) != 0)
		return rv;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		st_thr_row(s, out);
	else if (rc == SQLITE_DONE)
		rv = RM_ENOENT;
	else
		rv = st_sql_err(db, rc, "failed to read from");
	sqlite3_finalize(s);
	return rv;
}

int st_throttle_list(st_db *db, const struct st_throttle_query *q, struct st_throttle **rows, size_t *n)
{
	struct st_throttle *v = NULL, *nv;
	size_t cap = 0, k = 0;
	sqlite3_stmt *s;
	int rv, rc, active;

	if (!db || !q || !rows || !n)
		return RM_EINVAL;
	*rows = NULL;
	*n = 0;
	active = q->state && strcmp(q->state, "active") == 0;
	if (q->state && !active && !st_throttle_state_valid(q->state)) {
		rm_log_error("unknown throttle state '%s'", q->state);
		return RM_EINVAL;
	}
	if ((rv = st_thr_prepare(db,
				 "SELECT " ST_THR_COLS " FROM throttle WHERE"
				 " (?1 IS NULL OR state = ?1)"
				 " AND (?5 = 0 OR state IN ('pending', 'sent', 'applied'))"
				 " AND (?2 IS NULL OR server = ?2) AND (?3 IS NULL OR ce = ?3)"
				 " AND created >= ?4"
				 " ORDER BY CASE WHEN ?6 > 0 THEN -id ELSE id END LIMIT CASE WHEN ?6 > 0 THEN ?6 ELSE -1 END",
				 &s, "failed to read from")) != 0)
		return rv;
	if (q->state && !active)
		sqlite3_bind_text(s, 1, q->state, -1, SQLITE_STATIC);
	if (q->server)
		sqlite3_bind_text(s, 2, q->server, -1, SQLITE_STATIC);
	if (q->ce)
		sqlite3_bind_text(s, 3, q->ce, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, q->since_ns);
	sqlite3_bind_int(s, 5, active);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)q->limit);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (k == cap) {
			cap = cap ? cap * 2 : 16;
			if (!(nv = realloc(v, cap * sizeof(*v)))) {
				free(v);
				sqlite3_finalize(s);
				return RM_ENOMEM;
			}
			v = nv;
		}
		st_thr_row(s, &v[k++]);
	}
	if (rc != SQLITE_DONE) {
		free(v);
		rv = st_sql_err(db, rc, "failed to read from");
	} else {
		*rows = v;
		*n = k;
	}
	sqlite3_finalize(s);
	return rv;
}
