# mux_gw.awk - writes mux_gw.events: awk -v n=3000 -f mux_gw.awk > mux_gw.events
#
# A gateway (node "gw", pid 800) that forwards every request to its own
# server over ONE multiplexed loopback connection (127.0.0.1:40000 ->
# 127.0.0.1:2380), the shape of a Go gateway calling its gRPC server:
#   - four writer threads (1000..1003, CPU 0) each answered a client once
#     (a reply on a server-side socket), so under follow-replies everything
#     they do afterwards is a continuation chain that never anchors: each of
#     their n sends on the connection (100 bytes each) is a part that stays
#     pending until the horizon ("sends that never resolve");
#   - one reader thread (900, CPU 1) reads the connection without ever
#     sleeping or sending on it, so all its reads are one segment whose
#     inbound range grows with every read: its part in each window covers
#     every send so far.
# Paired naively, every given-up send wakes every reader part covering it,
# and each of those re-reads every send it covers: work grows with the
# square of the sends held.
BEGIN {
	if (!n) n = 3000
	print "rametr-events 1 window_ns=1000000000 offset_ns=1700000000000000000 ncpu=2"
	print "1000 1 switch prev=0 prev_state=S next=900 next_pid=800"
	prev = 0
	for (w = 0; w < 4; w++) {
		t = 2000 + w * 1000
		printf "%d 0 switch prev=%d prev_state=%s next=%d next_pid=800\n", t, prev, prev ? "R" : "S", 1000 + w
		printf "%d 0 send tid=%d pid=800 comm=writer sock=%d fam=4 laddr=10.0.0.1:2379 raddr=10.1.0.%d:%d bytes=10 seq=1 srv=1\n", t + 100, 1000 + w, 10 + w, w % 3 + 1, 40000 + w
		prev = 1000 + w
	}
	step = int(5000000000 / n)
	for (i = 0; i < n; i++) {
		t = 1000000 + i * step
		w = 1000 + i % 4
		if (w != prev)
			printf "%d 0 switch prev=%d prev_state=R next=%d next_pid=800\n", t, prev, w
		prev = w
		seq = 1000 + i * 100
		printf "%d 0 send tid=%d pid=800 sock=77 fam=4 laddr=127.0.0.1:40000 raddr=127.0.0.1:2380 bytes=100 seq=%d\n", t + 200, w, seq
		printf "%d 1 recv tid=900 pid=800 sock=78 fam=4 laddr=127.0.0.1:2380 raddr=127.0.0.1:40000 bytes=100 seq=%d srv=1\n", t + 300, seq
	}
	t = 1000000 + n * step
	printf "%d 0 switch prev=%d prev_state=S next=0\n", t, prev
	printf "%d 1 switch prev=900 prev_state=S next=0\n", t
}
