package writers

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

func sampleManifest() *Manifest {
	return &Manifest{Topic: "t", Partition: 1, Start: 10, End: 20, Attempt: "a1",
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
	if got.Version != ManifestVersion || got.Files[0] != m.Files[0] || got.End != 20 {
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
	for i := bytes.IndexByte(c, '\n'); i < len(c); i++ {
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
	f.Add([]byte("sluice-manifest 2 crc32c=00000000 len=0\n"))
	f.Add([]byte("sluice-manifest 9 whatever\n{}"))
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

// rawManifest seals body under a header of the given version, as a writer
// of that version would (for version 2: the real checksum).
func rawManifest(version int, body string) []byte {
	return []byte(fmt.Sprintf("sluice-manifest %d crc32c=%08x len=%d\n%s", version, crc32.Checksum([]byte(body), castagnoli), len(body), body))
}

// TestManifestForwardCompatible: the checksum covers the raw bytes, so a
// manifest with fields this reader does not know is whole and reads fine
// (the old scheme re-marshalled the struct and called it torn).
func TestManifestForwardCompatible(t *testing.T) {
	body := `{"topic":"t","partition":1,"start":10,"end":20,"attempt":"a1","records":0,"files":[],` +
		`"written_by":"sluice 9.9","lineage":{"job":"pv","run":7}}`
	m, err := DecodeManifest(rawManifest(ManifestVersion, body))
	if err != nil {
		t.Fatalf("unknown fields: %v", err)
	}
	if m.Start != 10 || m.End != 20 || m.Attempt != "a1" {
		t.Fatalf("%+v", m)
	}
	// Whitespace the encoder would not produce is fine too: raw bytes count.
	if _, err := DecodeManifest(rawManifest(ManifestVersion, "  "+body+"\n\n")); err != nil {
		t.Fatal(err)
	}
}

// TestManifestNewerVersion: the version is read before anything else; a
// newer one is ErrManifestVersion (never torn), whatever its layout.
func TestManifestNewerVersion(t *testing.T) {
	for _, b := range [][]byte{
		rawManifest(ManifestVersion+1, `{"topic":"t"}`),
		[]byte("sluice-manifest 3 sha256=abcd len=9 zone=eu\n{\"a\":1}"),
		[]byte("sluice-manifest 3\nanything at all"),
		[]byte(`{"version":1,"topic":"t","checksum":"1234"}`), // pre-release JSON layout
	} {
		_, err := DecodeManifest(b)
		if !errors.Is(err, ErrManifestVersion) || errors.Is(err, ErrTornManifest) {
			t.Errorf("%q: %v, want ErrManifestVersion only", b, err)
		}
		if err != nil && !strings.Contains(err.Error(), "version") {
			t.Errorf("unclear error: %v", err)
		}
	}
	// Torn or corrupt manifests of this version stay torn.
	good := rawManifest(ManifestVersion, `{"topic":"t"}`)
	for _, b := range [][]byte{good[:10], good[:len(good)-1], bytes.Replace(good, []byte(`"t"`), []byte(`"u"`), 1), []byte("sluice-manifest x\n")} {
		if _, err := DecodeManifest(b); !errors.Is(err, ErrTornManifest) {
			t.Errorf("%q: %v, want torn", b, err)
		}
	}
}

// TestRecoverLeavesNewerManifest: a manifest of a newer version with an
// attempt directory next to it: Recover, Commits and NextStart refuse with
// ErrManifestVersion and touch nothing (the old scheme moved it to torn/ and
// the split was loaded twice).
func TestRecoverLeavesNewerManifest(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, recoverOpts)
	if res, err := runSplit(store, workload, workloadConfig(t), pageViewSchema(t)); err != nil || !res.Won {
		t.Fatal(res, err)
	}
	mp := ManifestPath(workload.Topic, workload.Partition, workload.Start)
	newer := rawManifest(ManifestVersion+1, `{"chunks":[{"uri":"x"}]}`)
	if err := fs.Remove(mp); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteExclusive(mp, newer); err != nil {
		t.Fatal(err)
	}
	// A dead attempt of that split, as a newer sluice might leave it.
	dir := attemptDir(workload.Topic, workload.Partition, workload.Start, "20240101T000000Z-0123456789abcdef")
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteExclusive(dir+"/pageviews+2+100.1.inprogress", []byte("x")); err != nil {
		t.Fatal(err)
	}
	before := walkFiles(t, fs, SluiceDir)
	if _, err := store.Recover(workload.Topic, workload.Partition); !errors.Is(err, ErrManifestVersion) {
		t.Fatalf("Recover: %v", err)
	}
	if _, err := store.Commits(workload.Topic, workload.Partition); !errors.Is(err, ErrManifestVersion) {
		t.Fatalf("Commits: %v", err)
	}
	if _, err := store.NextStart(workload.Topic, workload.Partition, 0); !errors.Is(err, ErrManifestVersion) {
		t.Fatalf("NextStart: %v", err)
	}
	if after := walkFiles(t, fs, SluiceDir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("files changed:\n%v\n%v", before, after)
	}
	if b, _ := vfs.ReadFile(fs, mp); !bytes.Equal(b, newer) {
		t.Fatal("the newer manifest was changed")
	}
}
