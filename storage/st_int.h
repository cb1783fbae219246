/*
 * st_int.h - internals shared by the storage sources (st.c, st_schema.c,
 * st_query.c) and its tests. Not part of the public API.
 */
#ifndef RM_ST_INT_H
#define RM_ST_INT_H

#include <sqlite3.h>

#include "st.h"

/* Prepared write statements, prepared once at open. */
enum st_stmt {
	ST_S_USAGE,
	ST_S_UNACCT,
	ST_S_TOTAL,
	ST_S_PEER_GET,
	ST_S_PEER_SET,
	ST_S_NODE_SEEN,
	ST_S_NODE_GET,
	ST_S_SPLIT,
	ST_S_HELD_PUT,
	ST_S_HELD_RESOLVE,
	ST_S_HELD_DELETE,
	ST_S_COUNT
};

struct st_db {
	sqlite3 *h;
	char *path;       /* for messages */
	unsigned flags;   /* ST_OPEN_* */
	int version;      /* schema version of the file */
	sqlite3_stmt *stmt[ST_S_COUNT];
};

/* Number of migration steps; step i (0-based) brings a file to version i+1. */
extern const int st_schema_nsteps;

/*
 * Brings the database on h to schema version target (1..st_schema_nsteps)
 * in one IMMEDIATE transaction, or, when readonly, only checks it is there.
 * Sets *version to the version found before migrating. Returns RM_OK,
 * RM_EVERSION (newer than target, older and readonly, or a foreign database),
 * RM_ESQL. Logs "failed to open '<path>': ...".
 */
int st_schema_migrate(sqlite3 *h, const char *path, int target, int readonly, int *version);

/* Logs "<what> '<path>': <sqlite message>" and maps the SQLite result code
 * rc to an rm_err (constraint failures from overflow -> RM_EINVAL). */
int st_sql_err(const st_db *db, int rc, const char *what);

/* Argument checks (log the problem and return RM_EINVAL, or RM_OK). */
int st_check_name(const char *what, const char *name, size_t max);
int st_check_query(const st_db *db, const struct st_query *q, void *rows, size_t *n);
/* Binds q's fields to whichever of :since, :until, :server, :res, :ce statement s names (st_query.c). */
void st_query_bind(sqlite3_stmt *s, const struct st_query *q);

/* Column text, "" for NULL. */
static inline const char *st_col_text(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	return t ? (const char *)t : "";
}

#endif
