package main

import (
	"bytes"
	"strings"
	"testing"
)

// The requests as etcd's own client (protoc-generated) writes them.
func TestRequestBytes(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"a one-key range", appendBytes(nil, 1, []byte("k1")), []byte{0x0a, 2, 'k', '1'}},
		{"a range with its end", appendBytes(appendBytes(nil, 1, []byte("r/")), 2, []byte("r0")),
			[]byte{0x0a, 2, 'r', '/', 0x12, 2, 'r', '0'}},
		{"a value past 127 bytes takes a two-byte length", appendBytes(nil, 2, bytes.Repeat([]byte{'y'}, 200)),
			append([]byte{0x12, 0xc8, 0x01}, bytes.Repeat([]byte{'y'}, 200)...)},
	}
	for _, c := range cases {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: % x, want % x", c.name, c.got, c.want)
		}
	}
}

// A RangeResponse: header (1, a message), kvs (2, repeated), more (3), count (4).
func rangeReply(count uint64, kvs int) []byte {
	b := appendBytes(nil, 1, []byte{0x08, 0x01}) // header {cluster_id: 1}
	for i := 0; i < kvs; i++ {
		b = appendBytes(b, 2, appendBytes(nil, 1, []byte("k")))
	}
	b = appendVarint(b, 3<<3|0)
	b = appendVarint(b, 0)
	b = appendVarint(b, 4<<3|0)
	return appendVarint(b, count)
}

func TestCheckReply(t *testing.T) {
	cases := []struct {
		name   string
		kind   string
		reply  []byte
		expect uint64
		fails  string // "" if the reply answers the call
	}{
		{"a point read of one key", "point", rangeReply(1, 1), 1, ""},
		{"a scan of 100 keys", "scan", rangeReply(100, 100), 100, ""},
		{"a scan that counted fewer", "scan", rangeReply(3, 3), 100, "counted 3 keys, not 100"},
		{"a put's reply: a header", "put", appendBytes(nil, 1, []byte{0x10, 0x05}), 0, ""},
		{"an empty reply", "put", nil, 0, "without a header"},
		{"a reply cut inside a field", "point", rangeReply(1, 1)[:5], 1, "truncated"},
		{"a reply with a fixed64 and a fixed32 field", "point",
			append(append(rangeReply(1, 1), 5<<3|1, 1, 2, 3, 4, 5, 6, 7, 8), 6<<3|5, 1, 2, 3, 4), 1, ""},
		{"an unknown wire type", "point", append(rangeReply(1, 1), 7<<3|3), 1, "wire type 3"},
	}
	for _, c := range cases {
		err := checkReply(c.kind, c.reply, c.expect)
		switch {
		case c.fails == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.fails)
		}
	}
}
