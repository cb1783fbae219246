// Package tbgrpc is what tb-grpcserver and tb-grpcload agree on: the service
// and method names of the testbed's gRPC service, and the codec its messages
// travel in (raw bytes: a request is the tenant's name, a reply the body), so
// that no .proto file or protoc is needed. The codec is registered under the
// content-subtype "tbraw" (content-type application/grpc+tbraw); the client
// names it on every call and the server finds it by that name.
package tbgrpc

import (
	"fmt"

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

type codec struct{}

func (codec) Name() string { return CodecName }

func (codec) Marshal(v interface{}) ([]byte, error) {
	m, ok := v.(*Msg)
	if !ok {
		return nil, fmt.Errorf("tbraw: cannot marshal %T", v)
	}
	return m.B, nil
}

func (codec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(*Msg)
	if !ok {
		return fmt.Errorf("tbraw: cannot unmarshal into %T", v)
	}
	m.B = append(m.B[:0], data...)
	return nil
}

func init() {
	encoding.RegisterCodec(codec{})
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
