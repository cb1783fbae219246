// SPDX-License-Identifier: GPL-2.0
/*
 * tc_police.bpf.c - admission throttling (mechanism b): a tc
 * clsact ingress program that polices the inbound TCP payload of throttled
 * CEs with a token bucket per CE (slot), so that an event-loop server (one
 * thread for everyone) receives a throttled CE's requests no faster than its
 * cap allows, without stalling the other CEs queued behind it. Packets
 * without payload (ACKs, SYN, FIN) always pass; a payload packet finding too
 * bucket in debt is dropped and the client's TCP sends it again later.
 * Matches are those of throttle.h (remote = source address and port, local =
 * destination port). IPv4 and IPv6 without extension headers.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "throttle.h"

char LICENSE[] SEC("license") = "GPL";

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_TCP 6

struct tc_bucket {
	struct bpf_spin_lock lock;
	__u64 rate_bps;     /* bytes per second; 0 = slot unused */
	__u64 burst;        /* bytes */
	__s64 tokens;       /* bytes; below 0: in debt for the last packet */
	__u64 last_ns;
	__u64 passed, dropped;  /* payload bytes */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, THR_MAX_MATCHES);
	__type(key, __u32);
	__type(value, struct thr_match);
} tc_matches SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, THR_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct tc_bucket);
} tc_buckets SEC(".maps");

struct tc_key {
	__u32 family;
	__u32 raddr[4];
	__u32 rport, lport;
	__u32 slot;
};

static long tc_match_one(__u32 i, struct tc_key *k)
{
	struct thr_match *m = bpf_map_lookup_elem(&tc_matches, &i);

	if (!m || m->slot == 0 || m->family != k->family)
		return 0;
	if (k->rport < m->cport_lo || k->rport > m->cport_hi || k->lport < m->sport_lo ||
	    k->lport > m->sport_hi)
		return 0;
	if ((k->raddr[0] & m->mask[0]) != m->addr[0] || (k->raddr[1] & m->mask[1]) != m->addr[1] ||
	    (k->raddr[2] & m->mask[2]) != m->addr[2] || (k->raddr[3] & m->mask[3]) != m->addr[3])
		return 0;
	k->slot = m->slot;
	return 1;
}

SEC("tc")
int tc_police(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct tc_key k = {};
	struct tc_bucket *b;
	struct tcphdr *tcp;
	__u32 payload, slot;
	__u64 now, add;
	int pass;

	if ((void *)(eth + 1) > end)
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		__u32 ihl;

		if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_TCP)
			return TC_ACT_OK;
		ihl = ip->ihl * 4;
		if (ihl < sizeof(*ip))
			return TC_ACT_OK;
		tcp = (void *)ip + ihl;
		if ((void *)(tcp + 1) > end)
			return TC_ACT_OK;
		k.family = 2;
		k.raddr[0] = ip->saddr;
		payload = bpf_ntohs(ip->tot_len) - ihl - tcp->doff * 4;
		if (bpf_ntohs(ip->tot_len) < ihl + tcp->doff * 4)
			return TC_ACT_OK;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_TCP)
			return TC_ACT_OK;
		tcp = (void *)(ip6 + 1);
		if ((void *)(tcp + 1) > end)
			return TC_ACT_OK;
		k.family = 10;
		__builtin_memcpy(k.raddr, &ip6->saddr, 16);
		if (bpf_ntohs(ip6->payload_len) < tcp->doff * 4)
			return TC_ACT_OK;
		payload = bpf_ntohs(ip6->payload_len) - tcp->doff * 4;
	} else {
		return TC_ACT_OK;
	}
	if (payload == 0)
		return TC_ACT_OK;
	k.rport = bpf_ntohs(tcp->source);
	k.lport = bpf_ntohs(tcp->dest);
	bpf_loop(THR_MAX_MATCHES, tc_match_one, &k, 0);
	if (!k.slot)
		return TC_ACT_OK;
	slot = k.slot;
	b = bpf_map_lookup_elem(&tc_buckets, &slot);
	if (!b)
		return TC_ACT_OK;
	now = bpf_ktime_get_ns();
	bpf_spin_lock(&b->lock);
	if (b->rate_bps == 0) {
		pass = 1;
	} else {
		add = (now - b->last_ns) * b->rate_bps / 1000000000ull;
		if (add > 0) {
			b->tokens = b->tokens + (__s64)add > (__s64)b->burst ? (__s64)b->burst
									  : b->tokens + (__s64)add;
			b->last_ns = now;
		}
		/* a packet passes while the bucket is not in debt and may take it
		 * into debt: the burst can be smaller than a segment, and the mean
		 * rate still holds */
		pass = b->tokens > 0;
		if (pass) {
			b->tokens -= payload;
			b->passed += payload;
		} else {
			b->dropped += payload;
		}
	}
	bpf_spin_unlock(&b->lock);
	return pass ? TC_ACT_OK : TC_ACT_SHOT;
}
