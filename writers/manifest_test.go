package writers

import (
	"errors"
	"testing"
	"time"
)

func sampleManifest() *Manifest {
	return &Manifest{Version: 1, Topic: "t", Partition: 1, Start: 10, End: 20, Attempt: "a1",
		Committed: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Records: 10,
		Files: []File{{Temp: "_sluice/tmp/t/1/00000000000000000010/a1/x", Final: "x", Records: 10, Bytes: 99, First: 10, Last: 19}}}
}

func TestManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checksum == "" || got.Files[0] != m.Files[0] || got.End != 20 {
		t.Fatalf("%+v", got)
	}
	// Every strict prefix (a torn write) is detected.
	for i := 0; i < len(b); i++ {
		if _, err := DecodeManifest(b[:i]); !errors.Is(err, ErrTornManifest) {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
	// A changed byte is detected.
	c := append([]byte(nil), b...)
	for i := range c {
		if c[i] == '2' {
			c[i] = '3'
			break
		}
	}
	if _, err := DecodeManifest(c); !errors.Is(err, ErrTornManifest) {
		t.Fatalf("flipped: %v", err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	b, _ := sampleManifest().Encode()
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			return
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeManifest(again); err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
	})
}
