/*
 * col_restart.c - the state file's format and the totals a restarted
 * collector derives from it (col_restart.h): pure functions.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "col_restart.h"
#include "rm_err.h"
#include "banned.h"

static int col_restart_word(const char *s)
{
	return !strpbrk(s, " \t\r\n");
}

int col_restart_format(const struct col_restart_state *s, char *buf, size_t len)
{
	int n;

	if (!s->node[0] || !col_restart_word(s->node) || !col_restart_word(s->backend) || !col_restart_word(s->boot) ||
	    strpbrk(s->events, "\r\n"))
		return RM_EINVAL;
	n = snprintf(buf, len, COL_RESTART_MAGIC " node=%s backend=%s window_ns=%" PRIu64 " from_win=%" PRIu64
		     " busy_ns=%" PRIu64 " boot=%s events=%s\n", s->node, s->backend, s->window_ns, s->from_win,
		     s->busy_ns, s->boot, s->events);
	return n < 0 || (size_t)n >= len ? RM_EFULL : RM_OK;
}

/* The value of key (e.g. "node=") in line up to the next space into out[len]; the last key takes the rest. */
static int col_restart_field(const char *line, const char *key, int rest, char *out, size_t len)
{
	const char *p = strstr(line, key), *e;
	size_t n;

	if (!p || (p != line && p[-1] != ' '))
		return RM_EPROTO;
	p += strlen(key);
	e = rest ? p + strcspn(p, "\r\n") : p + strcspn(p, " \r\n");
	n = (size_t)(e - p);
	if (n >= len)
		return RM_EPROTO;
	memcpy(out, p, n);
	out[n] = '\0';
	return RM_OK;
}

static int col_restart_u64(const char *line, const char *key, uint64_t *v)
{
	char buf[24], *end;

	if (col_restart_field(line, key, 0, buf, sizeof(buf)) != RM_OK || !buf[0] || buf[0] == '-')
		return RM_EPROTO;
	*v = strtoull(buf, &end, 10);
	return *end ? RM_EPROTO : RM_OK;
}

int col_restart_parse(const char *line, struct col_restart_state *s)
{
	const char *ev;

	memset(s, 0, sizeof(*s));
	if (strncmp(line, COL_RESTART_MAGIC " ", sizeof(COL_RESTART_MAGIC)) != 0)
		return RM_EPROTO;
	line += sizeof(COL_RESTART_MAGIC);
	/* events= is last and may hold spaces: the other keys are read before it */
	ev = strstr(line, " events=");
	if (!ev)
		return RM_EPROTO;
	{
		char head[512];
		size_t n = (size_t)(ev - line);

		if (n >= sizeof(head))
			return RM_EPROTO;
		memcpy(head, line, n);
		head[n] = '\0';
		if (col_restart_field(head, "node=", 0, s->node, sizeof(s->node)) != RM_OK || !s->node[0] ||
		    col_restart_field(head, "backend=", 0, s->backend, sizeof(s->backend)) != RM_OK ||
		    col_restart_u64(head, "window_ns=", &s->window_ns) != RM_OK || !s->window_ns ||
		    col_restart_u64(head, "from_win=", &s->from_win) != RM_OK ||
		    col_restart_u64(head, "busy_ns=", &s->busy_ns) != RM_OK ||
		    col_restart_field(head, "boot=", 0, s->boot, sizeof(s->boot)) != RM_OK)
			return RM_EPROTO;
	}
	return col_restart_field(ev + 1, "events=", 1, s->events, sizeof(s->events));
}

int col_restart_lump(const struct col_restart_state *prev, const char *node, uint64_t window_ns,
		     const char *boot_now, uint64_t busy_now, uint64_t now_win, struct rm_totals *out,
		     const char **why)
{
	memset(out, 0, sizeof(*out));
	*why = NULL;
	if (strcmp(prev->node, node) != 0)
		*why = "it was another node's";
	else if (strcmp(prev->backend, "ebpf") != 0)
		*why = "it was another backend's";
	else if (prev->window_ns != window_ns)
		*why = "its window length differs";
	else if (!prev->boot[0] || !boot_now[0] || strcmp(prev->boot, boot_now) != 0)
		*why = "the node booted since (the kernel's counters started again)";
	else if (busy_now < prev->busy_ns)
		*why = "the kernel's busy CPU counter went back";
	else if (now_win < prev->from_win || !prev->from_win)
		*why = "its windows are not before this one";
	if (*why)
		return 0;
	out->win = now_win;
	out->busy_ns = busy_now - prev->busy_ns;
	out->restart = now_win - prev->from_win + 1;
	return 1;
}
