// Package tbtruth is what the testbed's Go servers (tb-goserver,
// tb-grpcserver) share to keep their own ground truth: the per-CE table in
// tb-server's CSV format (testbed/tb_truth.h:
// ce,requests,cpu_ns,rx_bytes,tx_bytes), the calling thread's CPU clock, the
// burn loop whose rounds make a request's CPU, the CE name check, and the
// servers' main loop that writes the table until they are stopped.
package tbtruth

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The burn loop's rounds of the light, medium and heavy requests (about 0.3,
// 1.0 and 3.1 ms here), and the most CEs a table holds.
const (
	LightIters  = 150000
	MediumIters = 600000
	HeavyIters  = 1800000
	MaxCEs      = 64
)

// Row is one CE's counters; add to them with their atomic Add.
type Row struct {
	Requests, CPUNs, Rx, Tx atomic.Uint64
}

// Table is the per-CE truth. Safe for concurrent use.
type Table struct {
	mu   sync.Mutex
	rows map[string]*Row
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{rows: make(map[string]*Row)}
}

// Get returns ce's row, created on first use; nil once MaxCEs rows exist.
func (t *Table) Get(ce string) *Row {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rows[ce]
	if r == nil {
		if len(t.rows) >= MaxCEs {
			return nil
		}
		r = &Row{}
		t.rows[ce] = r
	}
	return r
}

// Write writes the table to path through path.tmp.PID and rename(2), so a
// reader never sees half a file; the error says which file failed.
func (t *Table) Write(path string) error {
	t.mu.Lock()
	names := make([]string, 0, len(t.rows))
	for n := range t.rows {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("ce,requests,cpu_ns,rx_bytes,tx_bytes\n")
	for _, n := range names {
		r := t.rows[n]
		fmt.Fprintf(&b, "%s,%d,%d,%d,%d\n", n, r.Requests.Load(), r.CPUNs.Load(), r.Rx.Load(), r.Tx.Load())
	}
	t.mu.Unlock()
	tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("failed to write '%s': %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("failed to rename '%s': %w", tmp, err)
	}
	return nil
}

// Serve is a server's main loop: it writes t to path every second until
// SIGTERM or SIGINT, or until the server's Serve returns an error on done;
// then it calls stop (the server's stop) and writes t a last time. Messages
// go to stderr, prefixed with name. Returns the exit status: 0, or 1 if the
// server failed or the last write did.
func (t *Table) Serve(name string, done <-chan error, stop func(), path string) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	status := 0
	for running := true; running; {
		select {
		case <-sig:
			running = false
		case err := <-done:
			fmt.Fprintf(os.Stderr, "%s: serve failed: %v\n", name, err)
			status, running = 1, false
		case <-tick.C:
			if err := t.Write(path); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			}
		}
	}
	stop()
	if err := t.Write(path); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		status = 1
	}
	return status
}

// ThreadCPU is the calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID,
// through the clock_gettime system call); meaningful between
// runtime.LockOSThread and runtime.UnlockOSThread.
func ThreadCPU() uint64 {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return uint64(ts.Sec)*1000000000 + uint64(ts.Nsec)
}

var sink atomic.Uint64

// Burn runs n rounds of integer arithmetic (xorshift) whose result is kept.
func Burn(n int) {
	x := uint64(88172645463325252)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink.Add(x)
}

// ValidCE follows tb_check_ce: 1..63 of [A-Za-z0-9_.:-], not starting with "__".
func ValidCE(s string) bool {
	if len(s) == 0 || len(s) > 63 || strings.HasPrefix(s, "__") {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '.' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
