package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/internal/protoschema"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
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

// countingTransport counts the requests a registry client sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSharedReferencesFetchedOnce: a schema whose references share theirs
// (a lattice: each level's two files import both files of the next) is
// fetched with one request per referenced version, not one per path to
// it, which is 2^depth.
func TestSharedReferencesFetchedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port, err := kafka.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kafka.StartSluice(t, "--registry-listen", fmt.Sprintf("127.0.0.1:%d", port))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	rc, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	create := func(subject, text string, refs []sr.SchemaReference) sr.SubjectSchema {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; {
			ss, err := rc.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeProtobuf, References: refs})
			if err == nil {
				return ss
			}
			if time.Now().After(deadline) {
				t.Fatalf("register %s: %v", subject, err)
			}
			time.Sleep(50 * time.Millisecond) // polling the registry's start, bounded by the deadline
		}
	}
	const depth = 10
	var below []sr.SchemaReference // the next level's two files
	for k := depth; k >= 1; k-- {
		var level []sr.SchemaReference
		for _, side := range []string{"a", "b"} {
			name := fmt.Sprintf("%s%d", side, k)
			text := `syntax = "proto3"; package lat; `
			fields := ""
			for i, r := range below {
				text += fmt.Sprintf("import %q; ", r.Name)
				fields += fmt.Sprintf("%s f%d = %d; ", strings.TrimSuffix(strings.ToUpper(r.Name[:1])+r.Name[1:], ".proto"), i, i+1)
			}
			text += fmt.Sprintf("message %s { int64 id = 100; %s}", strings.ToUpper(side)+fmt.Sprint(k), fields)
			ss := create(name, text, below)
			level = append(level, sr.SchemaReference{Name: name + ".proto", Subject: name, Version: ss.Version})
		}
		below = level
	}
	top := create("top-value", `syntax = "proto3"; package lat; import "a1.proto"; import "b1.proto"; message Top { A1 a = 1; B1 b = 2; }`, below)
	d, err := newProtobufDecoder(&Spec{Decode: Decode{Format: "protobuf", Registry: url}})
	if err != nil {
		t.Fatal(err)
	}
	count := &countingTransport{}
	if d.reg.cl, err = sr.NewClient(sr.URLs(url), sr.HTTPClient(&http.Client{Transport: count})); err != nil {
		t.Fatal(err)
	}
	pm, err := d.message(ctx, top.ID, []int{0})
	if err != nil || pm.md.FullName() != "lat.Top" {
		t.Fatalf("message of schema %d: %+v %v", top.ID, pm, err)
	}
	if n, most := count.n.Load(), int64(1+2*depth); n > most {
		t.Fatalf("%d registry requests for a schema of %d referenced versions, want at most %d", n, 2*depth, most)
	}
}
