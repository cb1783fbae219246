// tb-grpcload - the open-loop gRPC load of one CE against tb-grpcserver, on
// ONE connection (HTTP/2) from --bind, so that Rametr tells the CEs apart by
// client address and the CE's calls are multiplexed: arrivals come at a fixed
// rate (evenly spaced, fixed in advance of completions) for a duration, each
// arrival --burst calls started at once, every call its own stream on the
// one connection. With --inflight N it runs a closed loop instead: N calls
// kept in flight on the one connection, each started when one ends, for the
// duration (a saturating load, as wrk's connections). Each reply is checked
// whole (tbgrpc.Reply). Prints one summary line with the most calls seen in
// flight and the 99th percentile of the calls' latency; exits 1 if a call
// failed or a reply was wrong.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"rametr.example/testbed/go/tbgrpc"
)

func main() {
	server := flag.String("server", "", "tb-grpcserver's address:port")
	bind := flag.String("bind", "", "source address of the connection (the CE's host)")
	ce := flag.String("ce", "", "the CE named in each call")
	method := flag.String("method", "Light", "the method called (Light, Medium, Heavy)")
	rate := flag.Float64("rate", 10, "calls per second")
	burst := flag.Int("burst", 3, "calls started together at each arrival (1..64)")
	dur := flag.Float64("duration", 10, "seconds of arrivals")
	resp := flag.Int("resp", 256, "reply bytes expected (as tb-grpcserver --resp)")
	closed := flag.Int("inflight", 0, "closed loop: calls kept in flight for --duration, "+
		"each started when one ends (1..1024; 0: the open loop of --rate and --burst)")
	flag.Parse()
	known := false
	for _, m := range tbgrpc.Methods {
		known = known || m == *method
	}
	if *server == "" || *ce == "" || !known || *rate <= 0 || *rate > 100000 || *dur <= 0 || *burst < 1 ||
		*burst > 64 || *resp < tbgrpc.ReplyMin || *closed < 0 || *closed > 1024 {
		fmt.Fprintln(os.Stderr, "tb-grpcload: --server and --ce are required; --method is Light, Medium or Heavy; "+
			"--rate and --duration must be positive, --burst 1..64, --resp at least 80, --inflight 0..1024")
		os.Exit(2)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if *bind != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(*bind)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := grpc.DialContext(ctx, *server, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", a)
		}),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(tbgrpc.CodecName)))
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tb-grpcload: failed to connect to '%s': %v\n", *server, err)
		os.Exit(1)
	}
	defer conn.Close()
	full := tbgrpc.FullMethod(*method)
	want := tbgrpc.Reply(*ce, *method, *resp)
	n := int(*rate**dur) / *burst * *burst
	gap := time.Duration(float64(time.Second) * float64(*burst) / *rate)
	var ok, failed, nbytes, inflight, maxInflight atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	var latMu sync.Mutex
	var lat []time.Duration
	call := func() {
		now := inflight.Add(1)
		for m := maxInflight.Load(); now > m && !maxInflight.CompareAndSwap(m, now); m = maxInflight.Load() {
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out tbgrpc.Msg
		t0 := time.Now()
		err := conn.Invoke(ctx, full, &tbgrpc.Msg{B: []byte(*ce)}, &out)
		d := time.Since(t0)
		cancel()
		inflight.Add(-1)
		if err == nil && !bytes.Equal(out.B, want) {
			err = fmt.Errorf("wrong reply: %d bytes, %q...", len(out.B), out.B[:min(len(out.B), 32)])
		}
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			return
		}
		nbytes.Add(int64(len(out.B)))
		ok.Add(1)
		latMu.Lock()
		lat = append(lat, d)
		latMu.Unlock()
	}
	start := time.Now()
	if *closed > 0 {
		end := start.Add(time.Duration(*dur * float64(time.Second)))
		var made atomic.Int64
		for j := 0; j < *closed; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					made.Add(1)
					call()
				}
			}()
		}
		wg.Wait()
		n = int(made.Load())
	} else {
		for i := 0; i < n; i += *burst {
			if d := time.Until(start.Add(time.Duration(i / *burst) * gap)); d > 0 {
				time.Sleep(d)
			}
			for j := 0; j < *burst; j++ {
				wg.Add(1)
				go func() { defer wg.Done(); call() }()
			}
		}
		wg.Wait()
	}
	secs := time.Since(start).Seconds()
	p99 := 0.0
	if len(lat) > 0 {
		sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
		p99 = float64(lat[(len(lat)*99+99)/100-1]) / 1e6
	}
	fmt.Printf("tb-grpcload: ce %s method %s: %d calls, %d ok, %d failed, %d bytes in %.3f s on one connection, "+
		"at most %d in flight, p99 %.3f ms\n", *ce, *method, n, ok.Load(), failed.Load(), nbytes.Load(), secs,
		maxInflight.Load(), p99)
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "tb-grpcload: first failure: %s\n", e)
		os.Exit(1)
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}
