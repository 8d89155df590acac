package config

import (
	"errors"
	"math"
	"testing"
)

func TestRequestLimits(t *testing.T) {
	d := Default()
	if d.MaxConnections != math.MaxInt32 || d.MaxConnectionsPerIP != math.MaxInt32 || d.FetchMaxBytes != 57671680 || d.QueuedMaxRequestBytes != 256<<20 {
		t.Fatalf("defaults: %+v", d)
	}
	b, err := Parse([]byte("max.connections=10\nmax.connections.per.ip=2\nqueued.max.request.bytes=-1\nfetch.max.bytes=2048\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxConnections != 10 || b.MaxConnectionsPerIP != 2 || b.QueuedMaxRequestBytes != -1 || b.FetchMaxBytes != 2048 {
		t.Fatalf("parsed: %+v", b)
	}
	for _, bad := range []string{"max.connections=-1", "fetch.max.bytes=100", "queued.max.request.bytes=-2"} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
}
