package writers_test

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// A loader task: recover the partition, find where to start, write the
// split's records hour-partitioned as Parquet, commit.
func Example() {
	dir, _ := os.MkdirTemp("", "warehouse-")
	defer os.RemoveAll(dir)
	fs, err := filesystem.Open("file://" + dir) // or hdfs://127.0.0.1:9000/warehouse/pageviews
	if err != nil {
		log.Fatal(err)
	}
	schema := avro.MustParse(`{"type":"record","name":"PageView","fields":[
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"url","type":"string"}]}`)

	store := writers.NewStore(fs, writers.StoreOptions{})
	if _, err := store.Recover("pageviews", 0); err != nil {
		log.Fatal(err)
	}
	start, _ := store.NextStart("pageviews", 0, 0)
	part, _ := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
	w, err := writers.NewSplitWriter(store, writers.Split{Topic: "pageviews", Partition: 0, Start: start, End: start + 4},
		writers.Config{Format: format.Options{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true}, Partitioner: part})
	if err != nil {
		log.Fatal(err)
	}
	t := time.Date(2024, 5, 1, 13, 58, 0, 0, time.UTC)
	for off := start; off < start+4; off++ {
		rec := map[string]any{"ts": t.Add(time.Duration(off) * time.Minute), "url": "/"}
		if err := w.Write(schema, rec, format.Meta{Offset: off, Timestamp: t}); err != nil {
			log.Fatal(err)
		}
	}
	res, err := w.Commit(start + 4) // the reader reached the split end
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("won:", res.Won)
	for _, f := range res.Manifest.Files {
		fmt.Println(f.Final, f.Records)
	}
	next, _ := store.NextStart("pageviews", 0, 0)
	fmt.Println("next split starts at", next)
	// Output:
	// won: true
	// dt=2024-05-01/hr=13/pageviews+0+0+2.parquet 2
	// dt=2024-05-01/hr=14/pageviews+0+2+4.parquet 2
	// next split starts at 4
}
