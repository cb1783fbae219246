// tb-grpcserver - the testbed's Go gRPC server: one Go process shared by the
// tenants (CEs), which keeps its own ground truth per CE in tb-server's CSV
// format (testbed/tb_truth.h: ce,requests,cpu_ns,rx_bytes,tx_bytes).
//
// gRPC over HTTP/2 (Debian's grpc-go, built in GOPATH mode) with the raw
// codec of package tbgrpc, so no protobuf is compiled. Three unary methods of
// service tb.Burn cost different, fixed amounts of CPU, as tb-goserver's
// paths do:
//
//	/tb.Burn/Light   the burn loop run tbtruth.LightIters times
//	/tb.Burn/Medium  tbtruth.MediumIters times
//	/tb.Burn/Heavy   tbtruth.HeavyIters times
//
// (--scale multiplies the three; 0 leaves only grpc-go's own work per call,
// as scripts/bench.sh measures it). The request's message is the CE's name;
// the reply is --resp bytes: "CE METHOD" padded with '.' and ending in a
// newline, so the client can check it whole.
//
// grpc-go runs as gRPC servers usually do: per connection one goroutine reads
// the frames and starts a goroutine per call (stream), which runs the
// handler and queues its reply; one writer goroutine per connection writes
// the queued frames of all the connection's streams, several in one write
// when several are queued.
//
// With --gateway ADDR:PORT it is also its own HTTP/1.1 gateway, as etcd's
// JSON gateway is: GET /light, /medium or /heavy with ?ce=NAME calls the
// method of that name on this server over one gRPC connection to --listen,
// which every caller shares (several calls in flight on it), and answers with
// the reply's bytes. The truth is the handlers' as above: the gateway's own
// work (HTTP, the client side of the call) is not in it.
//
// Truth: the handler locks its goroutine to its OS thread
// (runtime.LockOSThread) and reads the thread's CPU clock
// (CLOCK_THREAD_CPUTIME_ID) before and after the burn. The span holds the
// burn and whatever the runtime did on that thread meanwhile; it leaves out
// all that grpc-go and the runtime do for the call outside it: reading and
// decoding the frames, starting the call's goroutine, encoding and writing
// the reply, flow control, the scheduler, GC and sysmon. rx_bytes counts the
// request messages' bytes, tx_bytes the replies'.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"rametr.example/testbed/go/tbgrpc"
	"rametr.example/testbed/go/tbtruth"
)

type server struct {
	t    *tbtruth.Table
	resp int
	bad  atomic.Uint64
}

// handler is the unary handler of method, burning iters rounds per call.
func (s *server) handler(method string, iters int) func(interface{}, context.Context, func(interface{}) error, grpc.UnaryServerInterceptor) (interface{}, error) {
	return func(_ interface{}, _ context.Context, dec func(interface{}) error, _ grpc.UnaryServerInterceptor) (interface{}, error) {
		var req tbgrpc.Msg
		if err := dec(&req); err != nil {
			s.bad.Add(1)
			return nil, err
		}
		ce := string(req.B)
		if !tbtruth.ValidCE(ce) {
			s.bad.Add(1)
			return nil, status.Error(codes.InvalidArgument, "bad ce")
		}
		rw := s.t.Get(ce)
		if rw == nil {
			s.bad.Add(1)
			return nil, status.Error(codes.ResourceExhausted, "too many ces")
		}
		runtime.LockOSThread()
		c0 := tbtruth.ThreadCPU()
		tbtruth.Burn(iters)
		cpu := tbtruth.ThreadCPU() - c0
		runtime.UnlockOSThread()
		out := &tbgrpc.Msg{B: tbgrpc.Reply(ce, method, s.resp)}
		rw.Requests.Add(1)
		rw.CPUNs.Add(cpu)
		rw.Rx.Add(uint64(len(req.B)))
		rw.Tx.Add(uint64(len(out.B)))
		return out, nil
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:7310", "address:port to listen on")
	truthPath := flag.String("truth", "", "where to write the per-CE truth CSV (on exit and every second)")
	resp := flag.Int("resp", 256, "reply bytes per call (80..1048576)")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: the runtime's default)")
	scale := flag.Int("scale", 1, "multiplies every method's burn loop (0..100; 0: no burn)")
	gateway := flag.String("gateway", "", "also serve HTTP/1.1 on address:port, each request a call of this server over one shared gRPC connection")
	flag.Parse()
	if *resp < tbgrpc.ReplyMin || *resp > 1<<20 || *truthPath == "" || *scale < 0 || *scale > 100 {
		fmt.Fprintln(os.Stderr, "tb-grpcserver: --truth is required, --resp must be 80..1048576 and --scale 0..100")
		os.Exit(2)
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	s := &server{t: tbtruth.NewTable(), resp: *resp}
	iters := []int{tbtruth.LightIters * *scale, tbtruth.MediumIters * *scale, tbtruth.HeavyIters * *scale}
	desc := grpc.ServiceDesc{ServiceName: tbgrpc.Service, HandlerType: (*interface{})(nil), Metadata: "tbgrpc"}
	for i, m := range tbgrpc.Methods {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: m, Handler: s.handler(m, iters[i])})
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tb-grpcserver: failed to listen on '%s': %v\n", *listen, err)
		os.Exit(1)
	}
	gs := grpc.NewServer()
	gs.RegisterService(&desc, s)
	done := make(chan error, 1)
	go func() { done <- gs.Serve(ln) }()
	fmt.Printf("tb-grpcserver: listening on %s (GOMAXPROCS %d, grpc-go %s)\n", ln.Addr(), runtime.GOMAXPROCS(0), grpc.Version)
	if *gateway != "" {
		if err := serveGateway(*gateway, ln.Addr().String(), &s.bad); err != nil {
			fmt.Fprintf(os.Stderr, "tb-grpcserver: %v\n", err)
			os.Exit(1)
		}
	}

	status := s.t.Serve("tb-grpcserver", done, gs.Stop, *truthPath)
	fmt.Printf("tb-grpcserver: stopped, %d bad requests\n", s.bad.Load())
	os.Exit(status)
}

// serveGateway serves HTTP/1.1 on addr: GET /light, /medium, /heavy?ce=NAME
// calls that method of the gRPC server at self over one connection that all
// requests share, and answers with the reply. Failed calls count in bad.
func serveGateway(addr, self string, bad *atomic.Uint64) error {
	cc, err := grpc.Dial(self, grpc.WithInsecure(), grpc.WithDefaultCallOptions(grpc.CallContentSubtype(tbgrpc.CodecName)))
	if err != nil {
		return fmt.Errorf("failed to dial '%s': %v", self, err)
	}
	mux := http.NewServeMux()
	for _, m := range tbgrpc.Methods {
		full := tbgrpc.FullMethod(m)
		mux.HandleFunc("/"+strings.ToLower(m), func(w http.ResponseWriter, r *http.Request) {
			var out tbgrpc.Msg
			if err := cc.Invoke(r.Context(), full, &tbgrpc.Msg{B: []byte(r.URL.Query().Get("ce"))}, &out); err != nil {
				bad.Add(1)
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(out.B)))
			w.Write(out.B)
		})
	}
	gl, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen on '%s': %v", addr, err)
	}
	go http.Serve(gl, mux)
	fmt.Printf("tb-grpcserver: gateway on %s, calls over one connection to %s\n", gl.Addr(), self)
	return nil
}
