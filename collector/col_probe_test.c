/*
 * col_probe_test.c - the kernel feature probes on this machine's kernel.
 * col_probe_fresh_ino: the number it returns opens a batch, every socket
 * made before it (on each CPU this test may run on, so that every CPU's
 * batch is in use) is numbered below it and every socket made after it, on
 * whichever of those CPUs, is numbered from it on. col_probe_tp_btf: a tracepoint the backend needs is
 * there, a made-up one is not.
 */
#include <sched.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "col_probe.h"
#include "rm_test.h"
#include "banned.h"

/* The inode number of a new unix socket, kept open in *fd; 0 on failure. */
static uint32_t new_sock(int *fd)
{
	struct stat st;

	*fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (*fd < 0 || fstat(*fd, &st) != 0)
		return 0;
	return (uint32_t)st.st_ino;
}

/* Runs this thread on cpu alone: 0, or -1 if it may not run there. */
static int pin(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one);
}

/* Is ino at or past from, modulo 2^32 (the kernel's numbering wraps)? */
static int from_on(uint32_t ino, uint32_t from)
{
	return (uint32_t)(ino - from) < 0x80000000u;
}

static void test_fresh_ino(void)
{
	cpu_set_t all;
	uint32_t before[64], from, after;
	int fds[64], nb = 0, cpu, fd, i;

	CU_ASSERT_FATAL(sched_getaffinity(0, sizeof(all), &all) == 0);
	/* a socket on every CPU allowed: numbered from that CPU's current batch */
	for (cpu = 0; cpu < CPU_SETSIZE && nb < 64; cpu++) {
		if (!CPU_ISSET(cpu, &all) || pin(cpu) != 0)
			continue;
		before[nb] = new_sock(&fds[nb]);
		CU_ASSERT(before[nb] != 0);
		nb++;
	}
	CU_ASSERT_FATAL(sched_setaffinity(0, sizeof(all), &all) == 0);
	CU_ASSERT_FATAL(nb > 0);
	from = col_probe_fresh_ino();
	CU_ASSERT_FATAL(from != 0);
	CU_ASSERT_EQUAL(from % 1024, 1);
	for (i = 0; i < nb; i++) {
		CU_ASSERT(!from_on(before[i], from));
		close(fds[i]);
	}
	/* after it, on every CPU: from it on, though each CPU had a batch of its own */
	for (cpu = 0, i = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &all) || pin(cpu) != 0)
			continue;
		after = new_sock(&fd);
		CU_ASSERT(after != 0 && from_on(after, from));
		if (fd >= 0)
			close(fd);
		i++;
	}
	CU_ASSERT(i == nb);
	CU_ASSERT_FATAL(sched_setaffinity(0, sizeof(all), &all) == 0);
}

static void test_tp_btf(void)
{
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		RM_TEST_SKIP("no kernel BTF");
	CU_ASSERT(col_probe_tp_btf("sched_switch"));
	CU_ASSERT(col_probe_tp_btf("sock_send_length"));
	CU_ASSERT(!col_probe_tp_btf("rametr_no_such_tracepoint"));
}

static CU_TestInfo cases[] = {
	{ "a fresh socket number: older sockets below it, newer ones from it on", test_fresh_ino },
	{ "tracepoints the backend needs are found, a made-up one is not", test_tp_btf },
	CU_TEST_INFO_NULL,
};

RM_TEST_MAIN("col_probe", cases)
