package jobs

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/protoschema"
)

// TestProtobufBadIndexesAreNotKept: records naming message index paths the
// schema does not have are refused, and refusing them keeps nothing: a
// topic of such records (each index up to 2^20, 64 deep) would otherwise
// grow the decoder's message cache by one entry per distinct path, without
// bound. A path that names a message is kept, once.
func TestProtobufBadIndexesAreNotKept(t *testing.T) {
	ctx := context.Background()
	fd, err := protoschema.Parse(ctx, `syntax = "proto3"; package p; message M { int64 id = 1; message N { string s = 1; } }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newProtobufDecoder(&Spec{Decode: Decode{Format: "protobuf", Registry: "http://127.0.0.1:1"}}) // never asked: id 7 is compiled already
	if err != nil {
		t.Fatal(err)
	}
	d.reg.compiled[7] = fd
	for i := range 1000 {
		_, err := d.message(ctx, 7, []int{0, 1 + i})
		if !errors.Is(err, ErrBadRecord) {
			t.Fatalf("index path [0 %d]: %v, want a bad record", 1+i, err)
		}
	}
	for range 3 {
		if pm, err := d.message(ctx, 7, []int{0, 0}); err != nil || pm.md.FullName() != "p.M.N" {
			t.Fatalf("index path [0 0]: %+v %v, want p.M.N", pm, err)
		}
	}
	if n := len(d.messages); n != 1 {
		t.Fatalf("the decoder keeps %d message entries after 1000 bad index paths and one good one, want 1", n)
	}
}
