package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// slowMapper is identity at 2 ms a record: a task that takes many leases'
// worth of time.
type slowMapper struct{}

func (slowMapper) Schema(in avro.Schema) (avro.Schema, error) { return in, nil }
func (slowMapper) Map(rec *jobs.Record, emit func(map[string]any) error) error {
	time.Sleep(2 * time.Millisecond)
	return emit(rec.Value)
}

// A task that runs for ten times its lease keeps renewing it — within a
// fetched batch too, since the writers leave renewal to the loader — so a
// recovery running all the while never takes it, and it commits its split
// exactly once.
func TestSlowTaskKeepsItsLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jobs.RegisterMapper("slow-test", func(jobs.MapperConfig) (jobs.Mapper, error) { return slowMapper{}, nil })
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "slow", 3000, 1, time.Hour, -1)
	counts := produceAll(t, ctx, b.Addr, "slow", 1, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "warehouse")
	spec, _ := writeJob(t, dir, fmt.Sprintf(`
name: slow
source: {bootstrap: [%s], topics: [slow], max_records_per_task: 5000}
decode: {format: avro, schema_file: pageview.avsc}
map: {mapper: slow-test}
output: {uri: %s, format: parquet, metadata_columns: true}
`, b.Addr, out))
	const lease = 600 * time.Millisecond

	fs, err := filesystem.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	store := writers.NewStore(fs, writers.StoreOptions{Lease: lease})
	stop := make(chan struct{})
	reaped := make(chan int, 1)
	go func() { // another run's recovery, all the while
		n := 0
		defer func() { reaped <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if rep, err := store.Recover("slow", 0); err == nil {
				n += len(rep.Discarded)
			}
		}
	}()
	began := time.Now()
	rep, err := jobs.Run(ctx, spec, jobs.Options{Store: writers.StoreOptions{Lease: lease}})
	close(stop)
	if n := <-reaped; n != 0 || errors.Is(err, writers.ErrAttemptExpired) {
		t.Fatalf("recovery took %d live attempts (run: %v)", n, err)
	}
	if err != nil || rep.Totals.RowsOut != 3000 {
		t.Fatalf("%+v %v", rep.Totals, err)
	}
	if took := time.Since(began); took < 5*lease {
		t.Fatalf("the task took %s, not the many leases this test needs", took)
	}
	checkExactlyOnce(t, out, "slow", counts, true)
}
