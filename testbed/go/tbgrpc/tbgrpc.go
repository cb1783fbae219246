// Package tbgrpc is what the testbed's gRPC programs share: the service and
// method names of tb-grpcserver and tb-grpcload, the codec their messages
// travel in (raw bytes: a request is the tenant's name, a reply the body), so
// that no .proto file or protoc is needed, and the tally of a load's calls.
// The codec is registered under the content-subtype "tbraw" (content-type
// application/grpc+tbraw); the client names it on every call and the server
// finds it by that name. A client of another server (tb-etcdload) forces a
// RawCodec under the name that server expects.
package tbgrpc

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// Service is the gRPC service name; Methods its unary methods, lightest first.
const Service = "tb.Burn"

var Methods = []string{"Light", "Medium", "Heavy"}

// CodecName is the content-subtype of the raw-bytes codec.
const CodecName = "tbraw"

// Msg is one message: its bytes as they travel in the gRPC frame.
type Msg struct {
	B []byte
}

// RawCodec passes a *Msg's bytes through, under the content-subtype N.
type RawCodec struct {
	N string
}

func (c RawCodec) Name() string { return c.N }

func (c RawCodec) Marshal(v interface{}) ([]byte, error) {
	m, ok := v.(*Msg)
	if !ok {
		return nil, fmt.Errorf("%s: cannot marshal %T", c.N, v)
	}
	return m.B, nil
}

func (c RawCodec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(*Msg)
	if !ok {
		return fmt.Errorf("%s: cannot unmarshal into %T", c.N, v)
	}
	m.B = append(m.B[:0], data...)
	return nil
}

func init() {
	encoding.RegisterCodec(RawCodec{N: CodecName})
}

// Calls is the tally of a load's calls, safe for concurrent use: how many
// succeeded and failed, the reply bytes, the most in flight at once, the
// first failure and the latencies of the calls that succeeded.
type Calls struct {
	ok, failed, nbytes, inflight, maxInflight atomic.Int64
	firstErr                                  atomic.Value
	mu                                        sync.Mutex
	lat                                       []time.Duration
}

// Do makes one call with f, which returns the reply's bytes or an error, and
// counts it.
func (c *Calls) Do(f func() (int, error)) {
	now := c.inflight.Add(1)
	for m := c.maxInflight.Load(); now > m && !c.maxInflight.CompareAndSwap(m, now); m = c.maxInflight.Load() {
	}
	t0 := time.Now()
	n, err := f()
	d := time.Since(t0)
	c.inflight.Add(-1)
	if err != nil {
		c.failed.Add(1)
		c.firstErr.CompareAndSwap(nil, err.Error())
		return
	}
	c.nbytes.Add(int64(n))
	c.ok.Add(1)
	c.mu.Lock()
	c.lat = append(c.lat, d)
	c.mu.Unlock()
}

// Summary is "N ok, N failed, N bytes ... at most N in flight, p99 X ms"
// for a load that made calls in secs seconds; after every call has returned.
func (c *Calls) Summary(secs float64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p99 := 0.0
	if len(c.lat) > 0 {
		sort.Slice(c.lat, func(a, b int) bool { return c.lat[a] < c.lat[b] })
		p99 = float64(c.lat[(len(c.lat)*99+99)/100-1]) / 1e6
	}
	return fmt.Sprintf("%d ok, %d failed, %d bytes in %.3f s on one connection, at most %d in flight, p99 %.3f ms",
		c.ok.Load(), c.failed.Load(), c.nbytes.Load(), secs, c.maxInflight.Load(), p99)
}

// FirstErr is the first failure's text, "" if none failed.
func (c *Calls) FirstErr() string {
	if e := c.firstErr.Load(); e != nil {
		return e.(string)
	}
	return ""
}

// FullMethod is the path a client calls for method m ("/tb.Burn/Light").
func FullMethod(m string) string {
	return "/" + Service + "/" + m
}

// ReplyMin is the smallest reply size Reply accepts.
const ReplyMin = 80

// Reply is the reply to ce calling method, resp (>= ReplyMin) bytes: "CE
// METHOD" padded with '.' and ending in a newline.
func Reply(ce, method string, resp int) []byte {
	b := make([]byte, resp)
	n := copy(b, ce+" "+method)
	for i := n; i < resp-1; i++ {
		b[i] = '.'
	}
	b[resp-1] = '\n'
	return b
}

// Dial opens one plaintext HTTP/2 connection to server, from address bind
// ("" any), its calls in the codec co; waits at most 10 s for it.
func Dial(server, bind string, co grpc.CallOption) (*grpc.ClientConn, error) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if bind != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(bind)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return grpc.DialContext(ctx, server, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", a)
		}),
		grpc.WithDefaultCallOptions(co))
}
