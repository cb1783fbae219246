// tb-etcdload - the open-loop load of one CE against etcd's own gRPC API
// (etcdserverpb.KV), on ONE connection (HTTP/2) from --bind, the way an etcd
// client talks to its server: arrivals at a fixed rate (evenly spaced, fixed
// in advance of completions), each call its own stream on the one
// connection, so calls overlap when the server is slow. A call is one of:
//
//	point  Range of one key (--key), linearizable (etcd's default)
//	scan   Range of every key from --key up to --end, linearizable
//	put    Put of --value-bytes bytes under --key
//
// The messages are written and read as protobuf wire bytes by hand (a
// Range request is a key and a range end; a reply's count and header are
// checked), so no .proto file, protoc or etcd client library is needed: they
// travel in tbgrpc's raw codec named "proto", which is what etcd's server
// expects. Prints one
// summary line; exits 1 if a call failed or a reply was not what the call
// asked for (a Range whose count is not --expect, a Put without a header).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"

	"rametr.example/testbed/go/tbgrpc"
)

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendBytes appends field f of wire type 2 (length-delimited) holding p.
func appendBytes(b []byte, f int, p []byte) []byte {
	b = appendVarint(b, uint64(f)<<3|2)
	b = appendVarint(b, uint64(len(p)))
	return append(b, p...)
}

func readVarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("truncated varint")
}

// fields walks the top-level fields of a message: for each, its number,
// wire type, and its varint (type 0) or its bytes (type 2).
func fields(b []byte, each func(f int, wt int, v uint64, p []byte)) error {
	for len(b) > 0 {
		k, n, err := readVarint(b)
		if err != nil {
			return err
		}
		b = b[n:]
		f, wt := int(k>>3), int(k&7)
		switch wt {
		case 0:
			v, n, err := readVarint(b)
			if err != nil {
				return err
			}
			b = b[n:]
			each(f, wt, v, nil)
		case 2:
			l, n, err := readVarint(b)
			if err != nil || uint64(len(b)-n) < l {
				return errors.New("truncated field")
			}
			each(f, wt, 0, b[n:n+int(l)])
			b = b[n+int(l):]
		case 1:
			if len(b) < 8 {
				return errors.New("truncated fixed64")
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return errors.New("truncated fixed32")
			}
			b = b[4:]
		default:
			return fmt.Errorf("wire type %d", wt)
		}
	}
	return nil
}

// checkReply says whether a reply answers the call: a header (field 1) in
// both kinds, and for a Range its count (field 4) equal to expect.
func checkReply(kind string, b []byte, expect uint64) error {
	header, count := false, uint64(0)
	if err := fields(b, func(f int, wt int, v uint64, p []byte) {
		if f == 1 && wt == 2 {
			header = true
		}
		if f == 4 && wt == 0 {
			count = v
		}
	}); err != nil {
		return fmt.Errorf("a reply of %d bytes: %v", len(b), err)
	}
	if !header {
		return fmt.Errorf("a reply of %d bytes without a header", len(b))
	}
	if kind != "put" && count != expect {
		return fmt.Errorf("a range counted %d keys, not %d", count, expect)
	}
	return nil
}

func main() {
	server := flag.String("server", "", "etcd's client address:port")
	bind := flag.String("bind", "", "source address of the connection (the CE's host)")
	ce := flag.String("ce", "", "the CE's name (for the summary line)")
	kind := flag.String("kind", "point", "point, scan or put")
	key := flag.String("key", "", "the key read or written (scan: the first key)")
	end := flag.String("end", "", "scan: the range's end (exclusive)")
	expect := flag.Uint64("expect", 1, "point and scan: the keys each range must count")
	vbytes := flag.Int("value-bytes", 100, "put: the value's bytes")
	rate := flag.Float64("rate", 10, "calls per second")
	count := flag.Int("count", 0, "calls made in all (the last starts at (count-1)/rate s)")
	flag.Parse()
	if *server == "" || *ce == "" || *key == "" || *rate <= 0 || *rate > 100000 || *count < 1 ||
		*vbytes < 0 || *vbytes > 1<<20 || (*kind == "scan") != (*end != "") ||
		(*kind != "point" && *kind != "scan" && *kind != "put") {
		fmt.Fprintln(os.Stderr, "tb-etcdload: --server, --ce, --key and --count are required; --kind is point, scan "+
			"(with --end) or put; --rate must be positive, --value-bytes 0..1048576")
		os.Exit(2)
	}
	var req []byte
	method := "/etcdserverpb.KV/Range"
	switch *kind {
	case "point":
		req = appendBytes(nil, 1, []byte(*key))
	case "scan":
		req = appendBytes(appendBytes(nil, 1, []byte(*key)), 2, []byte(*end))
	case "put":
		value := make([]byte, *vbytes)
		for i := range value {
			value[i] = 'y'
		}
		req = appendBytes(appendBytes(nil, 1, []byte(*key)), 2, value)
		method = "/etcdserverpb.KV/Put"
	}
	conn, err := tbgrpc.Dial(*server, *bind, grpc.ForceCodec(tbgrpc.RawCodec{N: "proto"}))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tb-etcdload: failed to connect to '%s': %v\n", *server, err)
		os.Exit(1)
	}
	defer conn.Close()
	gap := time.Duration(float64(time.Second) / *rate)
	var calls tbgrpc.Calls
	var wg sync.WaitGroup
	call := func() {
		defer wg.Done()
		calls.Do(func() (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out tbgrpc.Msg
			if err := conn.Invoke(ctx, method, &tbgrpc.Msg{B: req}, &out); err != nil {
				return 0, err
			}
			return len(out.B), checkReply(*kind, out.B, *expect)
		})
	}
	start := time.Now()
	for i := 0; i < *count; i++ {
		if d := time.Until(start.Add(time.Duration(i) * gap)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go call()
	}
	wg.Wait()
	fmt.Printf("tb-etcdload: ce %s %s: %d calls, %s\n", *ce, *kind, *count, calls.Summary(time.Since(start).Seconds()))
	if e := calls.FirstErr(); e != "" {
		fmt.Fprintf(os.Stderr, "tb-etcdload: first failure: %s\n", e)
		os.Exit(1)
	}
}
