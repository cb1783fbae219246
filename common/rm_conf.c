/*
 * rm_conf.c - reads the daemons' INI files and drop-in directories and
 * merges their settings with the command line (format in rm_conf.h). Owns
 * the text it reads and the value lists it returns; knows no setting.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rm_conf.h"
#include "rm_err.h"
#include "banned.h"

char *rm_conf_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int rm_conf_parse(const char *text, size_t len, const char *file, rm_conf_fn fn, void *arg)
{
	char line[RM_CONF_MAX_LINE], section[RM_CONF_MAX_LINE];
	size_t pos = 0;
	int lineno = 0, errors = 0, have_section = 0, skip = 0, rv = RM_OK;

	if (!text)
		return RM_EINVAL;
	while (pos < len && (rv == RM_OK || rv == RM_ECONFIG)) {
		size_t e = pos, n;
		char *s, *eq;

		if (rv == RM_ECONFIG)
			errors++;
		rv = RM_OK;
		while (e < len && text[e] != '\n')
			e++;
		n = e - pos;
		lineno++;
		if (n >= sizeof(line)) {
			rm_log_error("%s:%d: line longer than %d bytes", file, lineno, RM_CONF_MAX_LINE - 1);
			errors++;
			pos = e + 1;
			continue;
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos = e + 1;
		if (memchr(line, '\0', n)) {
			rm_log_error("%s:%d: NUL byte in line", file, lineno);
			errors++;
			continue;
		}
		s = rm_conf_trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']');

			if (!close || *rm_conf_trim(close + 1)) {
				rm_log_error("%s:%d: malformed section header '%s'", file, lineno, s);
				errors++;
				skip = 1; /* its keys are not checked */
				continue;
			}
			*close = '\0';
			snprintf(section, sizeof(section), "%s", rm_conf_trim(s + 1));
			have_section = 1;
			skip = 0;
			rv = fn(arg, file, lineno, section, NULL, NULL);
			continue;
		}
		/* a comment after a value starts after white space */
		for (eq = s; *eq; eq++)
			if ((*eq == ';' || *eq == '#') && eq > s && isspace((unsigned char)eq[-1])) {
				*eq = '\0';
				break;
			}
		eq = strchr(s, '=');
		if (!eq) {
			rm_log_error("%s:%d: expected 'key = value', got '%s'", file, lineno, s);
			errors++;
			continue;
		}
		*eq = '\0';
		if (skip)
			continue;
		rv = fn(arg, file, lineno, have_section ? section : NULL, rm_conf_trim(s), rm_conf_trim(eq + 1));
	}
	if (rv == RM_ECONFIG)
		errors++;
	else if (rv != RM_OK)
		return rv;
	return errors ? RM_ECONFIG : RM_OK;
}

/* Reads the file at path into *buf (malloc'd, NUL-terminated) and *len. */
static int rm_conf_read(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 0;
	char *b = NULL;

	*buf = NULL;
	*len = 0;
	if (!f) {
		rm_log_error("failed to read '%s': %s", path, strerror(errno));
		return RM_EIO;
	}
	for (;;) {
		size_t n;

		if (*len + 4097 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			if (cap > RM_CONF_MAX_FILE + 8192u) {
				rm_log_error("failed to read '%s': larger than %u bytes", path, RM_CONF_MAX_FILE);
				free(b);
				fclose(f);
				return RM_ECONFIG;
			}
			if (!(nb = realloc(b, cap))) {
				free(b);
				fclose(f);
				return RM_ENOMEM;
			}
			b = nb;
		}
		n = fread(b + *len, 1, cap - *len - 1, f);
		*len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		rm_log_error("failed to read '%s': %s", path, strerror(errno));
		free(b);
		fclose(f);
		return RM_EIO;
	}
	fclose(f);
	b[*len] = '\0';
	*buf = b;
	return RM_OK;
}

static int rm_conf_file(const char *path, rm_conf_fn fn, void *arg)
{
	size_t len;
	char *buf;
	int rv;

	if ((rv = rm_conf_read(path, &buf, &len)) != RM_OK)
		return rv;
	rv = rm_conf_parse(buf, len, path, fn, arg);
	free(buf);
	return rv;
}

static int rm_conf_dropin(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return d->d_name[0] != '.' && n > 5 && strcmp(d->d_name + n - 5, ".conf") == 0;
}

static int rm_conf_bytes(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int rm_conf_load(const char *path, rm_conf_fn fn, void *arg)
{
	struct dirent **ents = NULL;
	char dir[4096], file[4096 + 256];
	int rv, n, i, errors = 0;

	rv = rm_conf_file(path, fn, arg);
	if (rv == RM_ECONFIG)
		errors++;
	else if (rv != RM_OK)
		return rv;
	if ((size_t)snprintf(dir, sizeof(dir), "%s.d", path) >= sizeof(dir))
		return RM_EINVAL;
	n = scandir(dir, &ents, rm_conf_dropin, rm_conf_bytes);
	if (n < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return errors ? RM_ECONFIG : RM_OK;
		rm_log_error("failed to read '%s': %s", dir, strerror(errno));
		return RM_EIO;
	}
	rv = RM_OK;
	for (i = 0; i < n; i++) {
		if (rv == RM_OK || rv == RM_ECONFIG) {
			if (rv == RM_ECONFIG)
				errors++;
			snprintf(file, sizeof(file), "%s/%s", dir, ents[i]->d_name);
			rv = rm_conf_file(file, fn, arg);
		}
		free(ents[i]);
	}
	free(ents);
	if (rv == RM_ECONFIG)
		errors++;
	else if (rv != RM_OK)
		return rv;
	return errors ? RM_ECONFIG : RM_OK;
}

void rm_setvals_free(struct rm_setvals *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n; i++) {
		free(s->v[i].value);
		free(s->v[i].where);
		free(s->v[i].name);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int rm_setvals_add(struct rm_setvals *s, int id, const char *value, const char *where, const char *name)
{
	struct rm_setval *nv = realloc(s->v, (s->n + 1) * sizeof(*nv));
	struct rm_setval *v;

	if (!nv)
		return RM_ENOMEM;
	s->v = nv;
	v = &s->v[s->n];
	v->id = id;
	v->value = strdup(value);
	v->where = strdup(where);
	v->name = strdup(name);
	if (!v->value || !v->where || !v->name) {
		free(v->value);
		free(v->where);
		free(v->name);
		return RM_ENOMEM;
	}
	s->n++;
	return RM_OK;
}

int rm_setvals_find(const struct rm_setvals *s, int id)
{
	size_t i;

	for (i = s->n; i > 0; i--)
		if (s->v[i - 1].id == id)
			return (int)(i - 1);
	return -1;
}

#define RM_SETTINGS_MAX 64

int rm_settings_argv(const struct rm_setting *t, size_t n, int argc, char **argv, struct rm_setvals *out)
{
	struct option lo[RM_SETTINGS_MAX + 1];
	char shorts[2 * RM_SETTINGS_MAX + 2], name[80];
	size_t i, ns = 0;
	int c, idx, rv;

	if (n > RM_SETTINGS_MAX)
		return RM_EINVAL;
	shorts[ns++] = ':';
	for (i = 0; i < n; i++) {
		lo[i].name = t[i].name;
		lo[i].has_arg = t[i].has_arg ? required_argument : no_argument;
		lo[i].flag = NULL;
		lo[i].val = 256 + (int)i;
		if (t[i].short_name) {
			shorts[ns++] = (char)t[i].short_name;
			if (t[i].has_arg)
				shorts[ns++] = ':';
		}
	}
	memset(&lo[n], 0, sizeof(lo[n]));
	shorts[ns] = '\0';
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == '?' || c == ':') {
			const char *arg = argv[optind - 1];

			if (c == ':')
				rm_log_error("option '%s' requires a value", arg);
			else if (optopt && optopt < 256)
				rm_log_error("unknown option '-%c'", optopt);
			else
				rm_log_error("unknown option '%s'", arg);
			return RM_EINVAL;
		}
		if (c >= 256) {
			idx = c - 256;
		} else {
			for (idx = 0; idx < (int)n && t[idx].short_name != c; idx++)
				;
		}
		snprintf(name, sizeof(name), "--%s", t[idx].name);
		if ((rv = rm_setvals_add(out, idx, t[idx].has_arg ? optarg : "yes", "", name)) != RM_OK)
			return rv;
	}
	if (optind != argc) {
		rm_log_error("unexpected argument '%s'", argv[optind]);
		return RM_EINVAL;
	}
	return RM_OK;
}

/* key == name, with '_' for '-'. */
static int rm_settings_same(const char *key, const char *name)
{
	for (; *key && *name; key++, name++)
		if (*key != *name && !(*key == '_' && *name == '-'))
			return 0;
	return *key == *name;
}

int rm_settings_key(const struct rm_setting *t, size_t n, const char *file, int line, const char *section,
		    const char *key, const char *value, struct rm_setvals *out)
{
	char where[4200];
	size_t i;

	for (i = 0; i < n; i++)
		if (t[i].in_file && rm_settings_same(key, t[i].name))
			break;
	if (i == n) {
		rm_log_error("%s:%d: unknown key '%s' in [%s]", file, line, key, section);
		return RM_ECONFIG;
	}
	if (!*value) {
		rm_log_error("%s:%d: empty value for '%s'", file, line, key);
		return RM_ECONFIG;
	}
	if (!t[i].has_arg) {
		if (!strcmp(value, "yes") || !strcmp(value, "on") || !strcmp(value, "true") || !strcmp(value, "1")) {
			value = "yes";
		} else if (!strcmp(value, "no") || !strcmp(value, "off") || !strcmp(value, "false") ||
			   !strcmp(value, "0")) {
			value = "no";
		} else {
			rm_log_error("%s:%d: invalid %s '%s' (yes or no)", file, line, key, value);
			return RM_ECONFIG;
		}
	}
	snprintf(where, sizeof(where), "%s:%d: ", file, line);
	return rm_setvals_add(out, (int)i, value, where, key);
}

int rm_settings_apply(const struct rm_setting *t, const struct rm_setvals *files, const struct rm_setvals *cmdline,
		      rm_setting_fn fn, void *arg)
{
	size_t i;
	int errors = 0;

	for (i = 0; files && i < files->n; i++) {
		const struct rm_setval *v = &files->v[i];

		if (t[v->id].repeat && cmdline && rm_setvals_find(cmdline, v->id) >= 0)
			continue;
		if (fn(arg, v) != 0)
			errors++;
	}
	for (i = 0; cmdline && i < cmdline->n; i++)
		if (fn(arg, &cmdline->v[i]) != 0)
			errors++;
	return errors ? RM_ECONFIG : RM_OK;
}
