// tb-goload - the open-loop HTTP/1.1 load of one CE against tb-goserver.
// Requests arrive at a fixed rate (evenly spaced, fixed in advance of
// completions) for a duration; each is a GET of --path?ce=NAME on one of at
// most --conns keep-alive connections, all bound to --bind so that Rametr
// tells the CEs apart by client address. Every reply is checked (status 200,
// its length). Prints one summary line; exits 1 if a request failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	server := flag.String("server", "", "tb-goserver's address:port, or unix:PATH")
	bind := flag.String("bind", "", "source address of every connection (the CE's host)")
	ce := flag.String("ce", "", "the CE named in each request")
	path := flag.String("path", "/light", "the path requested (/light, /medium, /heavy)")
	rate := flag.Float64("rate", 10, "requests per second")
	dur := flag.Float64("duration", 10, "seconds of arrivals")
	conns := flag.Int("conns", 4, "keep-alive connections at most")
	flag.Parse()
	if *server == "" || *ce == "" || *rate <= 0 || *rate > 100000 || *dur <= 0 || *conns < 1 {
		fmt.Fprintln(os.Stderr, "tb-goload: --server and --ce are required; --rate, --duration and --conns must be positive")
		os.Exit(2)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if *bind != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(*bind)}
	}
	host := *server
	dial := func(ctx context.Context, n, a string) (net.Conn, error) { return dialer.DialContext(ctx, n, a) }
	if strings.HasPrefix(host, "unix:") {
		path := strings.TrimPrefix(host, "unix:")
		host = "tb-goserver"
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) { return dialer.DialContext(ctx, "unix", path) }
	}
	tr := &http.Transport{
		DialContext:         dial,
		MaxIdleConnsPerHost: *conns,
		MaxConnsPerHost:     *conns,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := fmt.Sprintf("http://%s%s?ce=%s", host, *path, *ce)
	n := int(*rate * *dur)
	gap := time.Duration(float64(time.Second) / *rate)
	var ok, failed, bytes atomic.Uint64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for i := 0; i < n; i++ {
		if d := time.Until(start.Add(time.Duration(i) * gap)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(url)
			if err == nil {
				var got int64
				got, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode != 200 || got != resp.ContentLength) {
					err = fmt.Errorf("status %d, %d of %d bytes", resp.StatusCode, got, resp.ContentLength)
				}
				bytes.Add(uint64(got))
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			ok.Add(1)
		}()
	}
	wg.Wait()
	fmt.Printf("tb-goload: ce %s path %s: %d requests, %d ok, %d failed, %d bytes in %.1f s\n",
		*ce, *path, n, ok.Load(), failed.Load(), bytes.Load(), time.Since(start).Seconds())
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "tb-goload: first failure: %s\n", e)
		os.Exit(1)
	}
}
