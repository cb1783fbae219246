/*
 * col_jvm.h - recognises a Java virtual machine's launcher from its
 * executable's ELF file alone: the program links the JDK's launcher library
 * (libjli.so, as every `java` of OpenJDK does) or the VM itself (libjvm.so,
 * as programs that embed a JVM do). Such a process runs the VM's own threads
 * (JIT compilers, garbage collectors, the VM thread) beside the application's.
 */
#ifndef COL_JVM_H
#define COL_JVM_H

/*
 * RM_OK if the ELF file at path names libjli.so or libjvm.so among the
 * libraries it needs (its dynamic section), RM_ENOENT if not (or not ELF, or
 * statically linked), RM_EIO if it cannot be opened. Thread-safe; owns
 * nothing past the call.
 */
int col_jvm_is_jvm(const char *path);

#endif
