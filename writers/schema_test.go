package writers

import (
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/writers/format"
)

// Each file's manifest entry names its writer schema (Config.Describe's
// registry names) and the fingerprint of its own columns: equal for the
// files of one schema, different across schemas; kept through the
// manifest's encoding.
func TestFilesNameTheirSchema(t *testing.T) {
	for _, kind := range []format.Kind{format.Parquet, format.Avro} {
		t.Run(string(kind), func(t *testing.T) {
			store := NewStore(localFS(t), StoreOptions{})
			s1 := pageViewSchema(t)
			s2, err := avro.Parse(`{"type":"record","name":"PageView","namespace":"sluice.bench","fields":[{"name":"url","type":"string"}]}`)
			if err != nil {
				t.Fatal(err)
			}
			describe := func(s avro.Schema) *FileSchema {
				if s == s1 {
					return &FileSchema{Subject: "pv-value", Version: 1, ID: 11}
				}
				return &FileSchema{Subject: "pv-value", Version: 2, ID: 12}
			}
			split := Split{Topic: "pv", Partition: 0, Start: 0, End: 100}
			w, err := NewSplitWriter(store, split, Config{Format: format.Options{Kind: kind}, MaxRecords: 30, Describe: describe})
			if err != nil {
				t.Fatal(err)
			}
			for off := int64(0); off < 100; off++ {
				s := s1
				if off >= 50 {
					s = s2
				}
				if err := w.Write(s, pageView(off), format.Meta{Offset: off, Timestamp: t0}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := w.Commit(split.End)
			if err != nil {
				t.Fatal(err)
			}
			b, err := res.Manifest.Encode()
			if err != nil {
				t.Fatal(err)
			}
			m, err := DecodeManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			prefix := map[format.Kind]string{format.Parquet: "parquet:", format.Avro: "avro:"}[kind]
			fps := map[int]string{}
			for _, f := range m.Files {
				s := f.Schema
				wantVersion := 1
				if f.First >= 50 {
					wantVersion = 2
				}
				if s == nil || s.Subject != "pv-value" || s.Version != wantVersion || s.ID != 10+wantVersion ||
					!strings.HasPrefix(s.Fingerprint, prefix) || len(s.Fingerprint) != len(prefix)+16 {
					t.Fatalf("file %s (first %d): schema %+v", f.Final, f.First, s)
				}
				if fp, ok := fps[s.Version]; ok && fp != s.Fingerprint {
					t.Fatalf("version %d: fingerprints %s and %s", s.Version, fp, s.Fingerprint)
				}
				fps[s.Version] = s.Fingerprint
			}
			if len(m.Files) != 4 || fps[1] == fps[2] {
				t.Fatalf("files %d, fingerprints %v", len(m.Files), fps)
			}
		})
	}
}
