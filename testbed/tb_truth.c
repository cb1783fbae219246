/*
 * tb_truth.c - the ground-truth table of the testbed servers: a fixed array
 * of per-CE counters added to with atomic operations (a mutex only when a new
 * CE appears), its atomic CSV snapshot, and the CSV reader used by
 * tb-compare and the tests. Owns the rows of each struct tb_truth.
 *
 * Why no lock on the hot path: the bookkeeping must not add cross-thread
 * wake-ups (futex) to the service it measures, since Rametr follows such
 * wake-ups as hand-offs between threads.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rm_err.h"
#include "tb_truth.h"
#include "banned.h"

int tb_truth_init(struct tb_truth *t, size_t max_ces)
{
	if (!t || max_ces == 0)
		return RM_EINVAL;
	memset(t, 0, sizeof(*t));
	/* Rows never move: readers scan them without the lock. */
	t->rows = calloc(max_ces, sizeof(*t->rows));
	if (!t->rows)
		return RM_ENOMEM;
	if (pthread_mutex_init(&t->lock, NULL) != 0) {
		free(t->rows);
		t->rows = NULL;
		return RM_ENOMEM;
	}
	t->cap = t->max_ces = max_ces;
	return RM_OK;
}

void tb_truth_release(struct tb_truth *t)
{
	if (!t)
		return;
	free(t->rows);
	t->rows = NULL;
	t->n = t->cap = 0;
	pthread_mutex_destroy(&t->lock);
}

static int tb_ce_valid(const char *ce)
{
	size_t len;

	if (!ce)
		return 0;
	len = strlen(ce);
	return len > 0 && len < TB_CE_MAX && !strchr(ce, ',') && !strchr(ce, '\n');
}

/* The published row of ce, or NULL (no lock needed). */
static struct tb_truth_row *tb_truth_find(struct tb_truth *t, const char *ce)
{
	size_t n = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE), i;

	for (i = 0; i < n; i++)
		if (strcmp(t->rows[i].ce, ce) == 0)
			return &t->rows[i];
	return NULL;
}

int tb_truth_add(struct tb_truth *t, const char *ce, uint64_t requests, uint64_t cpu_ns,
		 uint64_t rx_bytes, uint64_t tx_bytes)
{
	struct tb_truth_row *r;

	if (!t || !t->rows || !tb_ce_valid(ce))
		return RM_EINVAL;
	r = tb_truth_find(t, ce);
	if (!r) {
		/* A new CE: rare, under the lock; the row is complete before n
		 * publishes it. */
		pthread_mutex_lock(&t->lock);
		r = tb_truth_find(t, ce);
		if (!r) {
			if (t->n >= t->max_ces) {
				pthread_mutex_unlock(&t->lock);
				return RM_EFULL;
			}
			r = &t->rows[t->n];
			memset(r, 0, sizeof(*r));
			snprintf(r->ce, sizeof(r->ce), "%s", ce);
			__atomic_store_n(&t->n, t->n + 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&t->lock);
	}
	__atomic_fetch_add(&r->requests, requests, __ATOMIC_RELAXED);
	__atomic_fetch_add(&r->cpu_ns, cpu_ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&r->rx_bytes, rx_bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&r->tx_bytes, tx_bytes, __ATOMIC_RELAXED);
	return RM_OK;
}

static int tb_row_cmp(const void *a, const void *b)
{
	return strcmp(((const struct tb_truth_row *)a)->ce, ((const struct tb_truth_row *)b)->ce);
}

int tb_truth_write(struct tb_truth *t, const char *path)
{
	struct tb_truth_row *snap = NULL;
	char tmp[4096];
	size_t n, i;
	FILE *f;
	int ok;

	if (!t || !path)
		return RM_EINVAL;
	n = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE);
	if (n) {
		snap = malloc(n * sizeof(*snap));
		if (!snap)
			return RM_ENOMEM;
		for (i = 0; i < n; i++) {
			const struct tb_truth_row *r = &t->rows[i];

			memcpy(snap[i].ce, r->ce, sizeof(snap[i].ce));
			snap[i].requests = __atomic_load_n(&r->requests, __ATOMIC_RELAXED);
			snap[i].cpu_ns = __atomic_load_n(&r->cpu_ns, __ATOMIC_RELAXED);
			snap[i].rx_bytes = __atomic_load_n(&r->rx_bytes, __ATOMIC_RELAXED);
			snap[i].tx_bytes = __atomic_load_n(&r->tx_bytes, __ATOMIC_RELAXED);
		}
	}
	if (n)
		qsort(snap, n, sizeof(*snap), tb_row_cmp);

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= sizeof(tmp)) {
		rm_log_error("truth path '%s' is too long", path);
		free(snap);
		return RM_EINVAL;
	}
	f = fopen(tmp, "w");
	if (!f) {
		rm_log_error("failed to open '%s': %s", tmp, strerror(errno));
		free(snap);
		return RM_EIO;
	}
	ok = fprintf(f, "%s\n", TB_TRUTH_HEADER) > 0;
	for (i = 0; ok && i < n; i++)
		ok = fprintf(f, "%s,%llu,%llu,%llu,%llu\n", snap[i].ce,
			     (unsigned long long)snap[i].requests, (unsigned long long)snap[i].cpu_ns,
			     (unsigned long long)snap[i].rx_bytes,
			     (unsigned long long)snap[i].tx_bytes) > 0;
	free(snap);
	if (fflush(f) != 0)
		ok = 0;
	if (fclose(f) != 0)
		ok = 0;
	if (!ok) {
		rm_log_error("failed to write '%s': %s", tmp, strerror(errno));
		unlink(tmp);
		return RM_EIO;
	}
	if (rename(tmp, path) != 0) {
		rm_log_error("failed to rename '%s' to '%s': %s", tmp, path, strerror(errno));
		unlink(tmp);
		return RM_EIO;
	}
	return RM_OK;
}

/* Splits line at commas into exactly nf fields (in place). Returns 1 on success. */
static int tb_split(char *line, char **f, int nf)
{
	int i = 0;
	char *p = line;

	for (;;) {
		char *c = strchr(p, ',');

		if (i == nf)
			return 0;
		f[i++] = p;
		if (!c)
			break;
		*c = '\0';
		p = c + 1;
	}
	return i == nf;
}

int tb_truth_load(const char *path, struct tb_truth_row **rows, size_t *n)
{
	struct tb_truth_row *out = NULL;
	size_t cnt = 0, cap = 0, i;
	char line[512];
	unsigned lineno = 0;
	int rv = RM_OK;
	FILE *f;

	if (!path || !rows || !n)
		return RM_EINVAL;
	f = fopen(path, "r");
	if (!f) {
		rm_log_error("failed to open '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		char *fld[5];
		struct tb_truth_row r;

		lineno++;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			rm_log_error("'%s' line %u: line too long", path, lineno);
			rv = RM_EPROTO;
			goto fail;
		}
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (lineno == 1) {
			if (strcmp(line, TB_TRUTH_HEADER) != 0) {
				rm_log_error("'%s': bad header, expected '%s'", path, TB_TRUTH_HEADER);
				rv = RM_EPROTO;
				goto fail;
			}
			continue;
		}
		if (len == 0)
			continue;
		memset(&r, 0, sizeof(r));
		if (!tb_split(line, fld, 5) || fld[0][0] == '\0' || strlen(fld[0]) >= TB_CE_MAX ||
		    tb_parse_u64(fld[1], 0, UINT64_MAX, &r.requests) != RM_OK ||
		    tb_parse_u64(fld[2], 0, UINT64_MAX, &r.cpu_ns) != RM_OK ||
		    tb_parse_u64(fld[3], 0, UINT64_MAX, &r.rx_bytes) != RM_OK ||
		    tb_parse_u64(fld[4], 0, UINT64_MAX, &r.tx_bytes) != RM_OK) {
			rm_log_error("'%s' line %u: malformed row", path, lineno);
			rv = RM_EPROTO;
			goto fail;
		}
		snprintf(r.ce, sizeof(r.ce), "%s", fld[0]);
		for (i = 0; i < cnt; i++) {
			if (strcmp(out[i].ce, r.ce) == 0) {
				rm_log_error("'%s' line %u: duplicate ce '%s'", path, lineno, r.ce);
				rv = RM_EPROTO;
				goto fail;
			}
		}
		if (cnt == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct tb_truth_row *nr = realloc(out, ncap * sizeof(*nr));

			if (!nr) {
				rv = RM_ENOMEM;
				goto fail;
			}
			out = nr;
			cap = ncap;
		}
		out[cnt++] = r;
	}
	if (ferror(f)) {
		rm_log_error("failed to read '%s': %s", path, strerror(errno));
		rv = RM_EIO;
		goto fail;
	}
	if (lineno == 0) {
		rm_log_error("'%s': empty file, expected header '%s'", path, TB_TRUTH_HEADER);
		rv = RM_EPROTO;
		goto fail;
	}
	fclose(f);
	*rows = out;
	*n = cnt;
	return RM_OK;
fail:
	fclose(f);
	free(out);
	return rv;
}
