/*
 * rm_conf.h - the configuration files of the daemons and the settings they
 * share with the command line: one INI reader (with file:line in every
 * message), drop-in directories, and a table of settings from which both the
 * getopt options and the keys of the program's own section come.
 *
 * Files: FILE, then FILE.d/NAME.conf in byte order of their names (a missing
 * directory is no error). Syntax, per line: "[section]" or "[kind "name"]",
 * "key = value", or a comment starting with '#' or ';' (also after a value,
 * when preceded by white space). Lines are at most RM_CONF_MAX_LINE bytes.
 *
 * Settings: every entry of a program's table is an option --NAME and a key
 * NAME (with '_' or '-') of the program's section, e.g. [collector] or
 * [aggregator]. Files are applied first, in order, then the command line:
 * a later value replaces an earlier one; for a repeatable setting the
 * command line's values replace all the files' values.
 */
#ifndef RM_CONF_H
#define RM_CONF_H

#include <stddef.h>

#define RM_CONF_MAX_LINE 4096
#define RM_CONF_MAX_FILE (16u << 20)

/*
 * Called for each section header (key and value NULL, section = the text
 * between the brackets, trimmed) and for each "key = value" line (section =
 * the last header of this file, NULL before any; key and value trimmed and
 * modifiable). Returns RM_OK, RM_ECONFIG after logging "FILE:LINE: ..."
 * (reading goes on, the result is RM_ECONFIG), or another error (reading
 * stops and returns it).
 */
typedef int (*rm_conf_fn)(void *arg, const char *file, int line, char *section, char *key, char *value);

/*
 * Reads configuration text named file (in messages). Returns RM_OK,
 * RM_ECONFIG after logging every problem of the text and of fn, RM_EINVAL
 * if text is NULL, or the first other error of fn.
 */
int rm_conf_parse(const char *text, size_t len, const char *file, rm_conf_fn fn, void *arg);

/*
 * Reads path, then its drop-ins (path.d/NAME.conf, byte order). Returns as
 * rm_conf_parse, or RM_EIO after logging "failed to read '%s'" (path or a
 * drop-in that cannot be read), RM_ECONFIG for a file over RM_CONF_MAX_FILE.
 */
int rm_conf_load(const char *path, rm_conf_fn fn, void *arg);

/* Removes white space at both ends of s, in place; returns the new start. */
char *rm_conf_trim(char *s);

/* One setting of a program (an entry of its table, index = id). */
struct rm_setting {
	const char *name;     /* --name; key `name` in a file ('-' or '_') */
	int has_arg;          /* 1: takes a value; 0: a switch ("yes" when given) */
	int repeat;           /* 1: may be given several times */
	int in_file;          /* 0: command line only (--config, --help, ...) */
	int short_name;       /* a letter for -x, or 0 */
};

/* A value given for setting id. */
struct rm_setval {
	int id;
	char *value;          /* switches: "yes" or "no" */
	char *where;          /* "FILE:LINE: " for a file's value, "" on the command line */
	char *name;           /* as written: "--ring-bytes" or "ring_bytes" */
};

struct rm_setvals {
	struct rm_setval *v;
	size_t n;
};

void rm_setvals_free(struct rm_setvals *s);

/*
 * Reads argv with getopt_long into out (the values point into copies).
 * Returns RM_OK, RM_EINVAL after logging an unknown option or a missing
 * value, or RM_ENOMEM. Resets getopt (optind) itself.
 */
int rm_settings_argv(const struct rm_setting *t, size_t n, int argc, char **argv, struct rm_setvals *out);

/*
 * A key of the program's section read from file:line into out: RM_OK,
 * RM_ECONFIG after logging an unknown key (or a setting not allowed in a
 * file, or a switch whose value is not yes/no, on/off, true/false, 1/0), or
 * RM_ENOMEM.
 */
int rm_settings_key(const struct rm_setting *t, size_t n, const char *file, int line, const char *section,
		    const char *key, const char *value, struct rm_setvals *out);

/*
 * Called for each value to apply; logs "<where>invalid <name> '<value>' ..."
 * and returns non-zero to refuse it.
 */
typedef int (*rm_setting_fn)(void *arg, const struct rm_setval *v);

/*
 * Applies files (in order), then cmdline, skipping the files' values of a
 * repeatable setting that the command line gives. Returns RM_OK, or
 * RM_ECONFIG if fn refused any value (every value is tried).
 */
int rm_settings_apply(const struct rm_setting *t, const struct rm_setvals *files, const struct rm_setvals *cmdline,
		      rm_setting_fn fn, void *arg);

/* Index of the last value of id in s, or -1. */
int rm_setvals_find(const struct rm_setvals *s, int id);

#endif
