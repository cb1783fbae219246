/*
 * rm_version.h - the version every Rametr program reports: the project
 * version of CMakeLists.txt, followed by `git describe` of the source tree
 * when it was built from a git checkout ("0.1.0 (git f8b1f73-dirty)").
 */
#ifndef RM_VERSION_H
#define RM_VERSION_H

#include <stdio.h>

/* The version string; static, never NULL. Thread-safe. */
const char *rm_version(void);

/* Prints "<progname> <version>\n" to f (the output of --version). */
void rm_version_print(FILE *f, const char *progname);

#endif
