/*
 * bench_golabel.c - how a Go server's CPU splits by tenant when goroutines
 * carry labels and the CPU is sampled (golabel.bpf.c, golabel.h). From
 * --binary it reads what the probes need (newproc's call of runqput,
 * struct runtime.g's m and struct runtime.m's g0 and curg, where the *g
 * sits from the thread's fsbase: col_gort_sched_inspect; or
 * runtime.newproc1 and runtime.runqput and where a uprobe on each costs
 * least); it attaches to the
 * server --pid the receive label, the uprobes and a cpu-clock sampler at
 * --freq Hz on every CPU, for --seconds; then prints per label (the peer's
 * address) the samples and the label's share of the labelled samples, the
 * samples' classes (labelled, unlabelled goroutines, the system stack), the
 * probes' counts, and each program's run count and run time (BPF
 * statistics).
 *
 * Prints "golabel: ready" once attached (a load may start then), then
 * lines "golabel: key=value ...". Needs root.
 * --inherit site (default) passes labels on with one uprobe per created
 * goroutine, on newproc's call of runqput; pair with two, on
 * runtime.newproc1 and runtime.runqput, which also sees runtime.ready and
 * can pass labels on to readied goroutines (--ready).
 * Usage: bench_golabel --binary PATH --pid PID [--seconds N] [--freq HZ]
 *        [--inherit site|pair] [--ready off|unlabelled|all]
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <inttypes.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "col_gort.h"
#include "golabel.h"
#include "golabel.skel.h"
#include "rm_err.h"
#include "banned.h"

/* What the probes need from the binary. */
struct gl_bin {
	uint64_t newproc1_off, runqput_off; /* where to put the uprobes (file offsets) */
	uint64_t site_off;                  /* newproc's call of runqput (file offset) */
	uint64_t g_m_off, m_g0_off, m_curg_off;
	int64_t g_tls_off; /* the *g's slot from fsbase */
};

/* Go's small-frame prologue on amd64: cmp 0x10(%r14),%rsp (4 bytes); jbe rel32 or rel8 */
static const unsigned char cmp_rsp[] = { 0x49, 0x3b, 0x66, 0x10 };

/* A function in .symtab: its file offset, address and size. */
struct gl_fn {
	uint64_t off, addr, size;
};

/* Function name in .symtab into *f: 1, or 0 if absent. */
static int find_sym(Elf *e, const char *name, struct gl_fn *f)
{
	Elf_Scn *s = NULL;
	GElf_Shdr sh;
	int found = 0;

	while ((s = elf_nextscn(e, s)) != NULL) {
		Elf_Data *d;
		size_t i, n;

		if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize || !(d = elf_getdata(s, NULL)))
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (i = 0; i < n; i++) {
			GElf_Sym sym;
			GElf_Shdr th;
			const char *sn;
			Elf_Scn *ts;

			if (!gelf_getsym(d, (int)i, &sym) || !(sn = elf_strptr(e, sh.sh_link, sym.st_name)))
				continue;
			if (found || strcmp(sn, name) || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
				continue;
			if (!(ts = elf_getscn(e, sym.st_shndx)) || !gelf_getshdr(ts, &th) || sym.st_value < th.sh_addr)
				continue;
			f->off = sym.st_value - th.sh_addr + th.sh_offset;
			f->addr = sym.st_value;
			f->size = sym.st_size;
			found = 1;
		}
	}
	return found;
}

/* Where a uprobe on the function at off costs least: the jbe after Go's stack-bound compare, else the entry. */
static uint64_t probe_at(int fd, uint64_t off)
{
	unsigned char head[sizeof(cmp_rsp) + 2];

	if (pread(fd, head, sizeof(head), (off_t)off) == (ssize_t)sizeof(head) && !memcmp(head, cmp_rsp, sizeof(cmp_rsp)) &&
	    (head[4] == 0x76 || (head[4] == 0x0f && head[5] == 0x86)))
		return off + sizeof(cmp_rsp);
	return off;
}

/* What the probes need from the binary: col_gort_sched_inspect's, and the pair's two functions. */
static int inspect(const char *path, struct gl_bin *b)
{
	struct gl_fn np1 = { 0 }, rq = { 0 };
	struct col_gort_sched sc;
	int fd, rv;
	Elf *e;

	memset(b, 0, sizeof(*b));
	if ((rv = col_gort_sched_inspect(path, &sc)) != RM_OK)
		return rv;
	b->site_off = sc.site_off;
	b->g_tls_off = sc.g_tls_off;
	b->g_m_off = sc.g_m_off;
	b->m_g0_off = sc.m_g0_off;
	b->m_curg_off = sc.m_curg_off;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return RM_EIO;
	elf_version(EV_CURRENT);
	if (!(e = elf_begin(fd, ELF_C_READ, NULL)) || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(fd);
		return RM_ENOENT;
	}
	if (!find_sym(e, "runtime.newproc1", &np1) || !find_sym(e, "runtime.runqput", &rq))
		rv = RM_ENOTSUP;
	b->newproc1_off = probe_at(fd, np1.off);
	b->runqput_off = probe_at(fd, rq.off);
	elf_end(e);
	close(fd);
	return rv;
}

struct gl_stat {
	uint64_t cnt, ns;
};

static void prog_stats(const struct bpf_program *p, struct gl_stat *s)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	s->cnt = s->ns = 0;
	if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0) {
		s->cnt = info.run_cnt;
		s->ns = info.run_time_ns;
	}
}

static int read_counts(struct golabel_bpf *skel, struct gl_counts *sum)
{
	int ncpu = libbpf_num_possible_cpus(), i;
	struct gl_counts *per;
	__u32 zero = 0;

	memset(sum, 0, sizeof(*sum));
	if (ncpu <= 0 || !(per = calloc((size_t)ncpu, sizeof(*per))))
		return RM_ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.counts), &zero, per) != 0) {
		free(per);
		return RM_EBPF;
	}
	for (i = 0; i < ncpu; i++) {
		const __u64 *f = (const __u64 *)&per[i];
		__u64 *t = (__u64 *)sum;
		size_t k;

		for (k = 0; k < sizeof(*sum) / sizeof(__u64); k++)
			t[k] += f[k];
	}
	free(per);
	return RM_OK;
}

/* One line per label: its samples (goroutines, system stack) and its share of the labelled samples. */
static int print_labels(struct golabel_bpf *skel, uint64_t labelled)
{
	int fd = bpf_map__fd(skel->maps.label_samples), ncpu = libbpf_num_possible_cpus(), i;
	struct gl_label_samples *per;
	__u32 key, next, *prev = NULL;

	if (ncpu <= 0 || !(per = calloc((size_t)ncpu, sizeof(*per))))
		return RM_ENOMEM;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		uint64_t user = 0, g0 = 0;
		char addr[INET_ADDRSTRLEN];

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, per) != 0)
			continue;
		for (i = 0; i < ncpu; i++) {
			user += per[i].user;
			g0 += per[i].g0;
		}
		inet_ntop(AF_INET, &key, addr, sizeof(addr));
		printf("golabel: label=%s samples=%" PRIu64 " user=%" PRIu64 " g0=%" PRIu64 " share_pct=%.2f\n", addr,
		       user + g0, user, g0, labelled ? 100.0 * (double)(user + g0) / (double)labelled : 0.0);
	}
	free(per);
	return RM_OK;
}

/* cpu-clock at freq Hz on every online CPU, each running prog; the links in links[] (*n of them). */
static int attach_sampler(struct bpf_program *prog, int freq, struct bpf_link **links, int *n, int max)
{
	int cpu, ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	*n = 0;
	for (cpu = 0; cpu < ncpu && cpu < max; cpu++) {
		struct perf_event_attr a = { .type = PERF_TYPE_SOFTWARE, .size = sizeof(a),
					     .config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1, .sample_freq = (__u64)freq };
		int pfd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (pfd < 0) {
			fprintf(stderr, "golabel: failed to open cpu-clock on CPU %d: %s\n", cpu, strerror(errno));
			return RM_EIO;
		}
		if (!(links[*n] = bpf_program__attach_perf_event(prog, pfd))) {
			fprintf(stderr, "golabel: failed to attach the sampler on CPU %d: %s\n", cpu, strerror(errno));
			close(pfd);
			return RM_EBPF;
		}
		(*n)++;
	}
	return RM_OK;
}

#define GL_CPUS_MAX 256
#define GL_PROGS 5
#define U(x) ((uint64_t)(x)) /* a __u64 for PRIu64 */

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "binary", required_argument, NULL, 'b' },
					      { "pid", required_argument, NULL, 'p' },
					      { "seconds", required_argument, NULL, 's' },
					      { "freq", required_argument, NULL, 'f' },
					      { "ready", required_argument, NULL, 'r' },
					      { "inherit", required_argument, NULL, 'i' },
					      { NULL, 0, NULL, 0 } };
	static const char *ready_names[] = { "off", "unlabelled", "all" };
	static const char *names[GL_PROGS] = { "read", "newproc1", "runqput", "newg", "sample" };
	const char *binary = NULL;
	long pid = 0, seconds = 10, freq = 2000;
	struct bpf_link *links[GL_CPUS_MAX + 3] = { 0 };
	struct gl_stat st[GL_PROGS][2];
	struct bpf_program *progs[GL_PROGS];
	struct golabel_bpf *skel;
	struct gl_counts c;
	struct col_gort gort;
	struct gl_bin b;
	int opt, rv, i, nl = 0, ns = 0, stats_fd, ready = GL_READY_OFF, pair = 0;
	uint64_t lab, all;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'b': binary = optarg; break;
		case 'p': pid = strtol(optarg, NULL, 10); break;
		case 's': seconds = strtol(optarg, NULL, 10); break;
		case 'f': freq = strtol(optarg, NULL, 10); break;
		case 'r':
			for (ready = 0; ready < 3 && strcmp(optarg, ready_names[ready]); ready++)
				;
			break;
		case 'i':
			if (!strcmp(optarg, "pair"))
				pair = 1;
			else if (strcmp(optarg, "site"))
				pair = -1;
			break;
		default: return 2;
		}
	}
	if (!binary || pid <= 0 || seconds <= 0 || freq < 10 || freq > 20000 || ready > 2 || pair < 0 ||
	    (ready != GL_READY_OFF && !pair)) {
		fprintf(stderr, "usage: bench_golabel --binary PATH --pid PID [--seconds N] [--freq HZ] "
				"[--inherit site|pair] [--ready off|unlabelled|all (with pair)]\n");
		return 2;
	}
	if ((rv = col_gort_inspect(binary, &gort)) != RM_OK || (rv = inspect(binary, &b)) != RM_OK) {
		fprintf(stderr, "golabel: '%s' cannot be followed: %s\n", binary, rm_strerror(rv));
		return 1;
	}
	printf("golabel: binary=%s version=%s newproc1_probe=0x%" PRIx64 " runqput_probe=0x%" PRIx64
	       " site_probe=0x%" PRIx64 " g_tls_off=%" PRId64 " g.m=%" PRIu64 " m.g0=%" PRIu64 " m.curg=%" PRIu64
	       " freq=%ld inherit=%s ready=%s\n", binary, gort.version, b.newproc1_off, b.runqput_off, b.site_off,
	       b.g_tls_off, b.g_m_off, b.m_g0_off, b.m_curg_off, freq, pair ? "pair" : "site", ready_names[ready]);
	if (!(skel = golabel_bpf__open())) {
		fprintf(stderr, "golabel: failed to open the BPF object\n");
		return 1;
	}
	skel->rodata->target_tgid = (__u32)pid;
	skel->rodata->g_tls_off = b.g_tls_off;
	skel->rodata->g_m_off = b.g_m_off;
	skel->rodata->m_g0_off = b.m_g0_off;
	skel->rodata->m_curg_off = b.m_curg_off;
	skel->rodata->gl_ready = (__u32)ready;
	if (golabel_bpf__load(skel) != 0) {
		fprintf(stderr, "golabel: failed to load the BPF object\n");
		golabel_bpf__destroy(skel);
		return 1;
	}
	if ((stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0)
		fprintf(stderr, "golabel: BPF run-time statistics unavailable: %s\n", strerror(errno));
	progs[0] = skel->progs.gl_read;
	progs[1] = skel->progs.gl_newproc;
	progs[2] = skel->progs.gl_runqput;
	progs[3] = skel->progs.gl_newg;
	progs[4] = skel->progs.gl_sample;
	rv = RM_OK;
	if (!(links[nl++] = bpf_program__attach(skel->progs.gl_read)) ||
	    (pair && !(links[nl++] = bpf_program__attach_uprobe(skel->progs.gl_newproc, false, (pid_t)pid, binary,
								(size_t)b.newproc1_off))) ||
	    (pair && !(links[nl++] = bpf_program__attach_uprobe(skel->progs.gl_runqput, false, (pid_t)pid, binary,
								(size_t)b.runqput_off))) ||
	    (!pair && !(links[nl++] = bpf_program__attach_uprobe(skel->progs.gl_newg, false, (pid_t)pid, binary,
								 (size_t)b.site_off)))) {
		fprintf(stderr, "golabel: failed to attach to '%s' (pid %ld): %s\n", binary, pid, strerror(errno));
		rv = RM_EBPF;
	}
	if (rv == RM_OK && (rv = attach_sampler(skel->progs.gl_sample, (int)freq, links + nl, &ns, GL_CPUS_MAX)) == RM_OK) {
		for (i = 0; i < GL_PROGS; i++)
			prog_stats(progs[i], &st[i][0]);
		printf("golabel: ready\n");
		fflush(stdout);
		sleep((unsigned)seconds);
		for (i = 0; i < GL_PROGS; i++)
			prog_stats(progs[i], &st[i][1]);
	}
	for (i = 0; i < nl + ns; i++)
		bpf_link__destroy(links[i]);
	if (rv == RM_OK && (rv = read_counts(skel, &c)) == RM_OK) {
		lab = c.s_user_lab + c.s_g0_lab;
		all = c.samples;
		printf("golabel: seconds=%ld samples=%" PRIu64 " user_labelled=%" PRIu64 " user_unlabelled=%" PRIu64
		       " g0_labelled=%" PRIu64 " g0_unlabelled=%" PRIu64 " g0_idle=%" PRIu64 " other=%" PRIu64
		       " bad=%" PRIu64 " labelled_pct=%.2f\n", seconds, all, U(c.s_user_lab), U(c.s_user_unlab),
		       U(c.s_g0_lab), U(c.s_g0_unlab), U(c.s_g0_idle), U(c.s_other), U(c.s_bad),
		       all ? 100.0 * (double)lab / (double)all : 0.0);
		printf("golabel: reads=%" PRIu64 " reads_bad=%" PRIu64 " newprocs=%" PRIu64 " inherits=%" PRIu64
		       " unlabels=%" PRIu64 " runqputs=%" PRIu64 " readies=%" PRIu64 " ready_labels=%" PRIu64 "\n",
		       U(c.reads), U(c.reads_bad), U(c.newprocs), U(c.inherits), U(c.unlabels), U(c.runqputs),
		       U(c.readies), U(c.ready_labels));
		for (i = 0; i < GL_PROGS; i++) {
			uint64_t n = st[i][1].cnt - st[i][0].cnt, t = st[i][1].ns - st[i][0].ns;

			printf("golabel: prog=%s runs=%" PRIu64 " run_ns=%" PRIu64 " ns_per_run=%.1f\n", names[i], n, t,
			       n ? (double)t / (double)n : 0.0);
		}
		rv = print_labels(skel, lab);
	}
	if (stats_fd >= 0)
		close(stats_fd);
	golabel_bpf__destroy(skel);
	return rv == RM_OK ? 0 : 1;
}
