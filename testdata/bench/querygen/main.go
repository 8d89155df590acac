// Command querygen writes a benchmark warehouse for testdata/bench/query.sh
// exactly as the loader does: per topic partition, consecutive splits, each
// a writers.SplitWriter committed through a writers.Store, partitioned by
// hour of the record's ts field, with the metadata columns.
//
//	go run ./testdata/bench/querygen -dir /tmp/wh -records 10000000 -format parquet
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

func main() {
	dir := flag.String("dir", "", "warehouse directory (the dataset is <dir>/pageviews)")
	records := flag.Int64("records", 10_000_000, "records in all")
	partitions := flag.Int("partitions", 4, "topic partitions (written in parallel)")
	perSplit := flag.Int64("split", 1_000_000, "records per split")
	kind := flag.String("format", "parquet", "parquet, avro or jsonl")
	schemaPath := flag.String("schema", "", "Avro schema file of the records (default: the 12-field page view of testdata/fixtures)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("querygen: -dir is required")
	}
	schemaText := fixtures.WritersPageView()
	if *schemaPath != "" {
		b, err := os.ReadFile(*schemaPath)
		if err != nil {
			log.Fatal(err)
		}
		schemaText = string(b)
	}
	schema, err := avro.Parse(schemaText)
	if err != nil {
		log.Fatal(err)
	}
	fs, err := filesystem.NewLocalNoSync(filepath.Join(*dir, "pageviews"))
	if err != nil {
		log.Fatal(err)
	}
	store := writers.NewStore(fs, writers.StoreOptions{})
	part, err := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
	if err != nil {
		log.Fatal(err)
	}
	cfg := writers.Config{Format: format.Options{Kind: format.Kind(*kind), Compression: "zstd", MetadataColumns: true}, Partitioner: part}
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	per := *records / int64(*partitions)
	start := time.Now()
	var wg sync.WaitGroup
	for p := range *partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			for s := int64(0); s < per; s += *perSplit {
				split := writers.Split{Topic: "pageviews", Partition: int32(p), Start: s, End: min(s+*perSplit, per)}
				w, err := writers.NewSplitWriter(store, split, cfg)
				if err != nil {
					log.Fatal(err)
				}
				for off := split.Start; off < split.End; off++ {
					// Offsets advance with time over the day, with some jitter.
					ts := day.Add(time.Duration(float64(off)/float64(per)*24*float64(time.Hour)) + time.Duration(rng.IntN(60_000))*time.Millisecond)
					if ts.After(day.Add(24*time.Hour - time.Millisecond)) {
						ts = day.Add(24*time.Hour - time.Millisecond)
					}
					if err := w.Write(schema, record(rng, off, ts), format.Meta{Offset: off, Timestamp: ts}); err != nil {
						log.Fatal(err)
					}
				}
				if _, err := w.Commit(split.End); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "querygen: %d records in %s\n", per*int64(*partitions), time.Since(start).Round(time.Millisecond))
}

var (
	countries = []string{"DE", "FR", "US", "JP", "BR", "IN", "GB", "ES", "IT", "NL"}
	devices   = []string{"desktop", "mobile", "tablet"}
	agents    = []string{"Mozilla/5.0 (X11; Linux x86_64) Chrome/124.0", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4) Safari/604.1",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/125.0", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) Safari/605.1.15"}
)

func record(rng *rand.Rand, off int64, ts time.Time) map[string]any {
	user := rng.Int64N(1_000_000)
	var ref any
	if rng.IntN(4) != 0 {
		ref = fmt.Sprintf("https://search.example/q?%d", rng.IntN(5000))
	}
	status := int32(200)
	if rng.IntN(50) == 0 {
		status = 404
	}
	return map[string]any{
		"ts": ts, "user_id": user, "session_id": fmt.Sprintf("s-%x-%d", user, off/50),
		"url": fmt.Sprintf("https://shop.example/item/%d", rng.IntN(20000)), "referrer": ref,
		"status": status, "latency_ms": rng.ExpFloat64() * 80, "country": countries[rng.IntN(len(countries))],
		"device": devices[rng.IntN(len(devices))], "user_agent": agents[rng.IntN(len(agents))],
		"bytes_sent": 500 + rng.Int64N(200_000), "is_bot": rng.IntN(100) == 0,
	}
}
