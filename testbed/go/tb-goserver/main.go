// tb-goserver - the testbed's Go HTTP server: one Go process shared by the
// tenants (CEs), which keeps its own ground truth per CE in tb-server's CSV
// format (testbed/tb_truth.h: ce,requests,cpu_ns,rx_bytes,tx_bytes).
//
// HTTP/1.1 with keep-alive (net/http, the standard library only). Each path
// costs a different, fixed amount of CPU:
//
//	GET /light?ce=NAME   the burn loop run tbtruth.LightIters times
//	GET /medium?ce=NAME  tbtruth.MediumIters times
//	GET /heavy?ce=NAME   tbtruth.HeavyIters times
//
// (--scale multiplies the three; 0 leaves only net/http's own work per request,
// as scripts/bench.sh measures it) and the answer is --resp bytes of body with
// a Content-Length.
//
// With --pool N the handler does not burn itself: it hands the request to one
// of N worker goroutines over a channel and writes the reply when the worker
// answers (the hand-off of a server with a worker pool, or of etcd's apply
// loop). The worker's burn is then the truth span, and the reply's write is
// left out of it.
//
// Truth: the handler locks its goroutine to its OS thread
// (runtime.LockOSThread) and reads the thread's CPU clock
// (CLOCK_THREAD_CPUTIME_ID through the clock_gettime system call) on entry
// and after flushing the reply, so the span holds this request's burn, the
// reply's write system call and whatever the runtime did on that thread in
// between (GC assists, preemption checks). It leaves out what Go does for the
// request outside the handler: net/http reading and parsing the request,
// the netpoller and scheduler finding the goroutine, the background GC
// workers and sysmon. rx_bytes counts the request line and headers as
// received (method, URI, protocol, headers with ": " and CRLFs, the blank
// line); tx_bytes counts the body only.
//
// With --lock-conns the truth is wider: the handler locks its connection's
// goroutine (net/http serves each HTTP/1.1 connection on one goroutine, which
// calls the handler) to its OS thread at the connection's first request and
// never unlocks it, so that thread runs that goroutine alone until the
// connection closes. A request's truth is then the thread's CPU since the
// connection's previous request ended: reading and parsing this request,
// being woken for it, the handler and the reply (the first request of a
// connection counts from its handler's start). What the runtime does on other
// threads (the netpoller's and GC workers' own goroutines, sysmon) is still
// outside. It measures what Go spends per connection goroutine, the unit
// Rametr's goroutine labels split by; locking changes how the runtime
// schedules (one thread per connection), so it is a witness, not the default.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"rametr.example/testbed/go/tbtruth"
)

// headBytes is the size of the request's line and headers as sent on the wire.
func headBytes(r *http.Request) uint64 {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	n += len("Host: ") + len(r.Host) + 2
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return uint64(n + 2)
}

// job is one request's burn handed to a worker; done gets its CPU time in ns.
type job struct {
	iters int
	done  chan uint64
}

// worker burns the jobs it takes, each on its locked OS thread, and answers
// with the thread's CPU time spent on it.
func worker(jobs <-chan job) {
	for j := range jobs {
		runtime.LockOSThread()
		c0 := tbtruth.ThreadCPU()
		tbtruth.Burn(j.iters)
		c1 := tbtruth.ThreadCPU()
		runtime.UnlockOSThread()
		j.done <- c1 - c0
	}
}

// connKey is the context key of a connection's connState (--lock-conns).
type connKey struct{}

// connState is a connection's goroutine's thread and its CPU clock at the end
// of the connection's last request (--lock-conns).
type connState struct {
	locked bool
	last   uint64
}

func main() {
	listen := flag.String("listen", "127.0.0.1:7300", "address:port to listen on, or unix:PATH for a unix socket")
	truthPath := flag.String("truth", "", "where to write the per-CE truth CSV (on exit and every second)")
	resp := flag.Int("resp", 256, "body bytes per reply (16..1048576)")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: the runtime's default)")
	scale := flag.Int("scale", 1, "multiplies every path's burn loop (0..100; 0: no burn)")
	pool := flag.Int("pool", 0, "worker goroutines that burn the requests' CPU (0: the handler burns)")
	lockConns := flag.Bool("lock-conns", false, "truth: each connection goroutine's own thread CPU per request (see the source)")
	flag.Parse()
	if *resp < 16 || *resp > 1<<20 || *truthPath == "" || *pool < 0 || *pool > 1024 || *scale < 0 || *scale > 100 {
		fmt.Fprintln(os.Stderr, "tb-goserver: --truth is required, --resp must be 16..1048576, --pool 0..1024 and --scale 0..100")
		os.Exit(2)
	}
	if *lockConns && *pool > 0 {
		fmt.Fprintln(os.Stderr, "tb-goserver: --lock-conns and --pool exclude each other")
		os.Exit(2)
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	t := tbtruth.NewTable()
	body := []byte(strings.Repeat(".", *resp-1) + "\n")
	iters := map[string]int{"/light": tbtruth.LightIters * *scale, "/medium": tbtruth.MediumIters * *scale, "/heavy": tbtruth.HeavyIters * *scale}
	var bad atomic.Uint64
	var jobs chan job
	if *pool > 0 {
		jobs = make(chan job)
		for i := 0; i < *pool; i++ {
			go worker(jobs)
		}
	}

	mux := http.NewServeMux()
	handler := func(w http.ResponseWriter, r *http.Request) {
		n := iters[r.URL.Path]
		ce := r.URL.Query().Get("ce")
		if !tbtruth.ValidCE(ce) {
			bad.Add(1)
			http.Error(w, "bad ce", http.StatusBadRequest)
			return
		}
		rw := t.Get(ce)
		if rw == nil {
			bad.Add(1)
			http.Error(w, "too many ces", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Header().Set("Content-Type", "text/plain")
		var cpu uint64
		var nw int
		if jobs != nil {
			j := job{iters: n, done: make(chan uint64, 1)}
			jobs <- j
			cpu = <-j.done
			nw, _ = w.Write(body)
		} else if *lockConns {
			cs := r.Context().Value(connKey{}).(*connState)
			if !cs.locked {
				runtime.LockOSThread() // for the connection's life: its goroutine exits with it
				cs.locked = true
				cs.last = tbtruth.ThreadCPU()
			}
			tbtruth.Burn(n)
			nw, _ = w.Write(body)
			w.(http.Flusher).Flush()
			now := tbtruth.ThreadCPU()
			cpu, cs.last = now-cs.last, now
		} else {
			runtime.LockOSThread()
			c0 := tbtruth.ThreadCPU()
			tbtruth.Burn(n)
			nw, _ = w.Write(body)
			w.(http.Flusher).Flush()
			cpu = tbtruth.ThreadCPU() - c0
			runtime.UnlockOSThread()
		}
		rw.Requests.Add(1)
		rw.CPUNs.Add(cpu)
		rw.Rx.Add(headBytes(r))
		rw.Tx.Add(uint64(nw))
	}
	for p := range iters {
		mux.HandleFunc(p, handler)
	}
	network, addr := "tcp", *listen
	if strings.HasPrefix(addr, "unix:") {
		network, addr = "unix", strings.TrimPrefix(addr, "unix:")
		os.Remove(addr) // a socket file left by an earlier run
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tb-goserver: failed to listen on '%s': %v\n", *listen, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, &connState{})
		}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("tb-goserver: listening on %s (GOMAXPROCS %d, pool %d, connections locked %v)\n", ln.Addr(),
		runtime.GOMAXPROCS(0), *pool, *lockConns)

	status := t.Serve("tb-goserver", done, func() { srv.Close() }, *truthPath)
	fmt.Printf("tb-goserver: stopped, %d bad requests\n", bad.Load())
	os.Exit(status)
}
