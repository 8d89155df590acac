package jobs_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

func TestMain(m *testing.M) {
	kafka.OnExit(hdfs.Stop)
	os.Exit(kafka.Main(m))
}

var pageViewBase = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// pageViewSchema is the loader tests' 6-field page view
// (fixtures.JobsPageView) and its text.
func pageViewSchema(t testing.TB) (avro.Schema, string) {
	t.Helper()
	text := fixtures.JobsPageView()
	s, err := avro.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return s, text
}

// pageViews makes n seeded page views spread evenly over span from
// pageViewBase, on partitions chosen by user. schemaID >= 0 frames each
// value the Confluent way (0x00, 4-byte id). hours counts them per hour.
func pageViews(t testing.TB, topic string, n, partitions int, span time.Duration, schemaID int) (recs []*kgo.Record, hours map[string]int) {
	t.Helper()
	s, _ := pageViewSchema(t)
	rng := rand.New(rand.NewSource(int64(n)))
	hours = map[string]int{}
	urls := []string{"/", "/home", "/cart", "/checkout", "/search?q=go", "/p/1", "/p/2"}
	statuses := []int{200, 200, 200, 200, 301, 404, 500}
	for i := 0; i < n; i++ {
		ts := pageViewBase.Add(time.Duration(int64(span) * int64(i) / int64(n)))
		user := rng.Int63n(10000)
		v := map[string]any{"ts": ts, "user_id": user, "url": urls[rng.Intn(len(urls))], "status": statuses[rng.Intn(len(statuses))],
			"referrer": nil, "duration_ms": rng.Intn(30000)}
		if rng.Intn(3) == 0 {
			v["referrer"] = "https://example.com/r" + fmt.Sprint(rng.Intn(50))
		}
		b, err := avro.Marshal(s, v)
		if err != nil {
			t.Fatal(err)
		}
		if schemaID >= 0 {
			b = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(schemaID)), b...)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(user % int64(partitions)), Timestamp: ts, Value: b,
			Key: []byte(fmt.Sprint(user))})
		hours[ts.Format("2006-01-02 15")]++
	}
	return recs, hours
}

// produceAll creates topic (when partitions > 0) and produces recs in
// order, each to its Partition; it returns the count per partition.
func produceAll(t testing.TB, ctx context.Context, addr, topic string, partitions int32, recs []*kgo.Record) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if partitions > 0 {
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
		if err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	counts := map[int32]int64{}
	for _, r := range recs {
		counts[r.Partition]++
	}
	return counts
}

// writeJob writes a job spec into dir and loads it.
func writeJob(t testing.TB, dir, text string) (*jobs.Spec, string) {
	t.Helper()
	p := writeJobFile(t, dir, text)
	s, err := jobs.LoadSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

// writeJobFile writes a job spec (and the page-view schema, as
// pageview.avsc) into dir.
func writeJobFile(t testing.TB, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pageview.avsc")); err != nil {
		if err := os.WriteFile(filepath.Join(dir, "pageview.avsc"), []byte(fixtures.JobsPageView()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func duck(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("duckdb: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dataGlob is every data file of a local warehouse (not _sluice).
func dataGlob(dir, ext string) string {
	return filepath.ToSlash(filepath.Join(dir, "dt=*", "hr=*", "*."+ext))
}

// checkExactlyOnce is the loader's invariant over a local warehouse:
// every data file at a final path is named by a manifest, no
// (_partition, _offset) appears twice, and — when complete — every offset
// [0, count) of every partition appears.
func checkExactlyOnce(t testing.TB, dir, topic string, counts map[int32]int64, complete bool) {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == "_sluice" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	listed := map[string]bool{}
	fs, err := filesystem.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	for p := range counts {
		ents, _ := os.ReadDir(filepath.Join(dir, "_sluice", "commits", topic, fmt.Sprint(p)))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue // the origin record
			}
			b, err := vfs.ReadFile(fs, path.Join("_sluice/commits", topic, fmt.Sprint(p), e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			m, err := writers.DecodeManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range m.Files {
				listed[f.Final] = true
			}
		}
	}
	for _, f := range files {
		if !listed[f] {
			t.Fatalf("invariant: %s is visible but no manifest lists it", f)
		}
	}
	if len(files) == 0 {
		if complete {
			t.Fatalf("invariant: no data files in %s", dir)
		}
		return
	}
	db := duck(t)
	var dups int
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT _partition, _offset FROM read_parquet('%s') GROUP BY 1, 2 HAVING count(*) > 1)`, dataGlob(dir, "parquet"))
	if err := db.QueryRow(q).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if dups != 0 {
		t.Fatalf("invariant: %d (_partition, _offset) pairs appear more than once", dups)
	}
	if !complete {
		return
	}
	for p, n := range counts {
		var rows, distinct, lo, hi int64
		q := fmt.Sprintf(`SELECT count(*), count(DISTINCT _offset), coalesce(min(_offset), -1), coalesce(max(_offset), -1) FROM read_parquet('%s') WHERE _partition = %d`,
			dataGlob(dir, "parquet"), p)
		if err := db.QueryRow(q).Scan(&rows, &distinct, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if rows != n || distinct != n || lo != 0 || hi != n-1 {
			t.Fatalf("invariant: partition %d holds %d rows, %d distinct offsets in [%d, %d]; want each of [0, %d) once", p, rows, distinct, lo, hi, n)
		}
	}
}

// copyOut copies the data files of an FS (not _sluice) into a local dir.
func copyOut(t testing.TB, fs vfs.FS, dir, dst string) {
	t.Helper()
	ents, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := path.Join(dir, e.Name)
		if p == "_sluice" {
			continue
		}
		if e.IsDir {
			copyOut(t, fs, p, dst)
			continue
		}
		r, err := fs.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.FromSlash(dir)), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dst, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(f, r)
		r.Close()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// hourCounts returns DuckDB's row count per hour directory (dt=…/hr=…),
// after checking every row's ts lies in its directory's hour.
func hourCounts(t testing.TB, db *sql.DB, glob string) map[string]int {
	t.Helper()
	var misplaced int
	q := fmt.Sprintf(`SELECT count(*) FROM read_parquet('%s', hive_partitioning = true)
		WHERE strftime(make_timestamp(epoch_us(ts)), '%%Y-%%m-%%d %%H') <> dt || ' ' || hr`, glob)
	if err := db.QueryRow(q).Scan(&misplaced); err != nil {
		t.Fatal(err)
	}
	if misplaced != 0 {
		t.Fatalf("%d rows lie outside their hour directory", misplaced)
	}
	rows, err := db.Query(fmt.Sprintf(`SELECT dt || ' ' || hr AS h, count(*) FROM read_parquet('%s', hive_partitioning = true) GROUP BY h`, glob))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var h string
		var n int
		if err := rows.Scan(&h, &n); err != nil {
			t.Fatal(err)
		}
		out[h] = n
	}
	return out
}

// copyCommits copies the manifests of topic's partitions into a local dir.
func copyCommits(t testing.TB, fs vfs.FS, dst, topic string, counts map[int32]int64) {
	t.Helper()
	for p := range counts {
		d := path.Join("_sluice/commits", topic, fmt.Sprint(p))
		ents, err := fs.List(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := vfs.ReadFile(fs, path.Join(d, e.Name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, filepath.FromSlash(d), e.Name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// tasksFor is the number of splits a plan cuts from counts.
func tasksFor(counts map[int32]int64, max int64) int {
	n := 0
	for _, c := range counts {
		n += int((c + max - 1) / max)
	}
	return n
}

// startSluiceWithRegistry starts a sluice broker process serving the
// schema registry too, and returns it with the registry's URL once the
// registry answers.
func startSluiceWithRegistry(t testing.TB) (*kafka.Sluice, string) {
	t.Helper()
	port, err := kafka.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	b := kafka.StartSluice(t, "--registry-listen", fmt.Sprintf("127.0.0.1:%d", port))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cl.Subjects(ctx)
		cancel()
		if err == nil {
			return b, url
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schema registry of sluice broker --registry-listen did not answer at %s: %v\n%s", url, err, b.Output())
		}
		time.Sleep(50 * time.Millisecond) // polling the registry's start, bounded by the deadline
	}
}

// registerSchema registers the page-view schema under subject and returns its id.
func registerSchema(t testing.TB, ctx context.Context, url, subject string) int {
	t.Helper()
	_, text := pageViewSchema(t)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("registering %s: %v", subject, err)
	}
	return ss.ID
}
