package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// The rewrite of each format copies the rows of its sources, whole and in
// row ranges: Avro (OCF, the loader's writer) and JSON lines (zstd) read
// back equal to the sources' rows in order.
func TestCompactRewriteFormats(t *testing.T) {
	schema := avro.MustParse(fixtures.JobsPageView())
	base := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, kind := range []format.Options{
		{Kind: format.Avro, Compression: "zstd", MetadataColumns: true},
		{Kind: format.JSONLines, Compression: "zstd", MetadataColumns: true},
	} {
		t.Run(string(kind.Kind), func(t *testing.T) {
			fs, err := filesystem.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			store := writers.NewStore(fs, writers.StoreOptions{})
			var files []writers.File
			for start := int64(0); start < 30; start += 10 {
				w, err := writers.NewSplitWriter(store, writers.Split{Topic: "pv", Partition: 0, Start: start, End: start + 10},
					writers.Config{Format: kind})
				if err != nil {
					t.Fatal(err)
				}
				for o := start; o < start+10; o++ {
					var ref any
					if o%3 == 0 {
						ref = fmt.Sprintf("https://r/%d", o)
					}
					v := map[string]any{"ts": base.Add(time.Duration(o) * time.Second), "user_id": o * 7, "url": fmt.Sprintf("/p/%d", o),
						"status": 200, "referrer": ref, "duration_ms": int(o)}
					if err := w.Write(schema, v, format.Meta{Topic: "pv", Offset: o, Timestamp: base}); err != nil {
						t.Fatal(err)
					}
				}
				res, err := w.Commit(start + 10)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, res.Manifest.Files...)
			}
			_, ext, _ := fileKind(files[0].Final)
			// read returns a file's rows as text, in order: Avro decoded,
			// JSON lines decompressed by a sink of their kind into plain lines.
			read := func(b []byte) []string {
				var out []string
				if ext == "avro" {
					dec, err := ocf.NewDecoder(bytes.NewReader(b))
					if err != nil {
						t.Fatal(err)
					}
					for dec.HasNext() {
						var v any
						if err := dec.Decode(&v); err != nil {
							t.Fatal(err)
						}
						out = append(out, fmt.Sprint(v))
					}
					return out
				}
				var buf bytes.Buffer
				plain, _ := newJSONLSink("jsonl", &buf)
				reader := &jsonlSink{ext: ext, out: plain.out}
				if _, err := reader.add(context.Background(), bytes.NewReader(b), int64(len(b)), nil); err != nil {
					t.Fatal(err)
				}
				plain.close()
				for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
					out = append(out, string(l))
				}
				return out
			}
			var want []string
			var srcs [][]byte
			for _, f := range files {
				r, _ := fs.Open(f.Final)
				b, _ := io.ReadAll(r)
				r.Close()
				srcs = append(srcs, b)
			}
			for _, b := range srcs {
				want = append(want, read(b)...)
			}
			if len(want) != 30 {
				t.Fatalf("sources hold %d rows", len(want))
			}
			for _, keep := range [][]rowRange{nil, {{2, 5}, {7, 9}}} {
				var out bytes.Buffer
				sk, err := newSink(ext, &out, "zstd")
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				for _, b := range srcs {
					k, err := sk.add(context.Background(), bytes.NewReader(b), int64(len(b)), keep)
					if err != nil {
						t.Fatal(err)
					}
					n += k
				}
				if err := sk.close(); err != nil {
					t.Fatal(err)
				}
				var exp []string
				for i := range srcs {
					part := want[i*10 : i*10+10]
					if keep == nil {
						exp = append(exp, part...)
						continue
					}
					for _, r := range keep {
						exp = append(exp, part[r.lo:r.hi]...)
					}
				}
				if got := read(out.Bytes()); n != int64(len(exp)) || !reflect.DeepEqual(got, exp) {
					t.Fatalf("keep %v: %d rows\n%v\nwant\n%v", keep, n, got, exp)
				}
			}
		})
	}
}
