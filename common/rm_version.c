/*
 * rm_version.c - the version string, from the header generated at build
 * time (common/rm_version.cmake). Owns nothing else.
 */
#include "rm_version.h"
#include "rm_version_gen.h"
#include "banned.h"

const char *rm_version(void)
{
	return RM_VERSION;
}

void rm_version_print(FILE *f, const char *progname)
{
	fprintf(f, "%s %s\n", progname, RM_VERSION);
}
