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
	"os"
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
	conn, err := tbgrpc.Dial(*server, *bind, grpc.CallContentSubtype(tbgrpc.CodecName))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tb-grpcload: failed to connect to '%s': %v\n", *server, err)
		os.Exit(1)
	}
	defer conn.Close()
	full := tbgrpc.FullMethod(*method)
	want := tbgrpc.Reply(*ce, *method, *resp)
	n := int(*rate**dur) / *burst * *burst
	gap := time.Duration(float64(time.Second) * float64(*burst) / *rate)
	var calls tbgrpc.Calls
	var wg sync.WaitGroup
	call := func() {
		calls.Do(func() (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out tbgrpc.Msg
			if err := conn.Invoke(ctx, full, &tbgrpc.Msg{B: []byte(*ce)}, &out); err != nil {
				return 0, err
			}
			if !bytes.Equal(out.B, want) {
				return 0, fmt.Errorf("wrong reply: %d bytes, %q...", len(out.B), out.B[:min(len(out.B), 32)])
			}
			return len(out.B), nil
		})
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
	fmt.Printf("tb-grpcload: ce %s method %s: %d calls, %s\n", *ce, *method, n, calls.Summary(secs))
	if e := calls.FirstErr(); e != "" {
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
