package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// loadedOffsets returns the count of rows per (_partition, _offset) pair
// loaded into a local parquet warehouse, and the total rows.
func loadedRows(t *testing.T, out string) (rows, distinct int64) {
	t.Helper()
	db := duck(t)
	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT (_partition, _offset, filename)) FROM read_parquet('%s', filename=true)`, dataGlob(out, "parquet"))
	if err := db.QueryRow(q).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	return rows, distinct
}

func adminOf(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func recreateTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	// Deletion is asynchronous on Apache Kafka: create until it takes.
	for i := 0; ; i++ {
		resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		if err == nil && resp.Err == nil {
			break
		}
		if i == 100 || ctx.Err() != nil {
			t.Fatalf("recreating %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; ; i++ { // and until its partitions answer
		parts, err := adm.ListEndOffsets(ctx, topic)
		if err == nil && parts.Error() == nil && len(parts[topic]) == int(partitions) {
			return
		}
		if i == 100 || ctx.Err() != nil {
			t.Fatalf("recreated %s does not answer: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A topic deleted and created again under its name is never loaded from
// the old topic's checkpoints: on_topic_recreated: fail stops the plan
// naming the topic; restart loads every record of the new topic, keeps the
// old topic's files, and says so in the run report. Against sluice (topic
// ids) and Apache Kafka, with as many and with fewer partitions.
func TestTopicRecreatedIsNeverLoadedFromOldCheckpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	clusters := []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"sluice", func(t *testing.T) string { return kafka.StartSluice(t).Addr }},
		{"kafka", func(t *testing.T) string { return kafka.SharedKafka(t).Addr }},
	}
	for _, c := range clusters {
		for _, after := range []int32{2, 1} {
			t.Run(fmt.Sprintf("%s/%d-partitions-after", c.name, after), func(t *testing.T) {
				addr := c.addr(t)
				topic := fmt.Sprintf("recreated-%s-%d-%d", c.name, after, time.Now().UnixNano()%1e6)
				first, _ := pageViews(t, topic, 400, 2, time.Hour, -1)
				produceAll(t, ctx, addr, topic, 2, first)
				dir := t.TempDir()
				out := filepath.Join(dir, "out")
				spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "recreated", addr, topic, 100, "schema_file: pageview.avsc", out))
				if _, err := jobs.Run(ctx, spec, jobs.Options{}); err != nil {
					t.Fatal(err)
				}
				recreateTopic(t, ctx, adminOf(t, addr), topic, after)
				// More records than the old checkpoints' offsets: the old code
				// loaded the new topic from them, skipping its first records in
				// silence (and dropped partition 1 when it is gone).
				second, _ := pageViews(t, topic, 600, int(after), time.Hour, -1)
				produceAll(t, ctx, addr, topic, 0, second)

				rep, err := jobs.Run(ctx, spec, jobs.Options{})
				if !errors.Is(err, jobs.ErrTopicRecreated) || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), "on_topic_recreated: restart") {
					t.Fatalf("on_topic_recreated: fail: got %v", err)
				}
				if rep.Totals.RowsOut != 0 {
					t.Fatalf("a refused run loaded %d rows", rep.Totals.RowsOut)
				}
				if rows, _ := loadedRows(t, out); rows != 400 {
					t.Fatalf("%d rows after the refused run, want the old topic's 400", rows)
				}

				spec.Source.OnTopicRecreated = jobs.TopicRecreatedRestart
				rep, err = jobs.Run(ctx, spec, jobs.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Topics) != 1 || !rep.Topics[0].Restart || rep.Topics[0].Incarnation != 1 || rep.Topics[0].Recreated == "" {
					t.Fatalf("run report topics: %+v", rep.Topics)
				}
				if rep.Totals.RowsOut != 600 {
					t.Fatalf("restart loaded %d rows of the new topic's 600", rep.Totals.RowsOut)
				}
				var text strings.Builder
				rep.WriteText(&text)
				if !strings.Contains(text.String(), "RECREATED") {
					t.Fatalf("the run's text does not tell of the restart:\n%s", text.String())
				}
				rows, distinct := loadedRows(t, out)
				if rows != 1000 || distinct != 1000 {
					t.Fatalf("%d rows (%d distinct) in the warehouse, want 400 old + 600 new", rows, distinct)
				}
				newFiles, _ := filepath.Glob(filepath.Join(out, "dt=*", "hr=*", "*+i1.parquet"))
				if len(newFiles) == 0 {
					t.Fatal("no file of incarnation 1")
				}
				if _, err := os.Stat(filepath.Join(out, "_sluice", "retired", topic, "000000", "commits")); err != nil {
					t.Fatalf("the old topic's checkpoints were not retired: %v", err)
				}
				// The next run goes on from the new topic's checkpoints.
				more, _ := pageViews(t, topic, 20, int(after), time.Hour, -1)
				produceAll(t, ctx, addr, topic, 0, more)
				rep, err = jobs.Run(ctx, spec, jobs.Options{})
				if err != nil || rep.Totals.RowsOut != 20 || rep.Topics[0].Restart {
					t.Fatalf("run after the restart: %+v %+v %v", rep.Topics, rep.Totals, err)
				}
			})
		}
	}
}

// Partitions added to a topic after a start: latest job's first run load
// from their first offset: the job decided "latest" once, for the
// partitions it saw then.
func TestAddedPartitionsLoadFromTheirStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	first, _ := pageViews(t, "grown", 50, 1, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "grown", 1, first)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "grown", b.Addr, "grown", 100, "schema_file: pageview.avsc", out))
	spec.Source.Start = jobs.StartLatest
	if rep, err := jobs.Run(ctx, spec, jobs.Options{}); err != nil || rep.Plan[0].Start != 50 {
		t.Fatalf("first run: %+v %v", rep.Plan, err)
	}
	adm := adminOf(t, b.Addr)
	if _, err := adm.CreatePartitions(ctx, 2, "grown"); err != nil { // 1 + 2 = 3 partitions
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		more, _ := pageViews(t, "grown", 20+int(p), 1, time.Hour, -1)
		for _, r := range more {
			r.Partition = p
		}
		recs = append(recs, more...)
	}
	produceAll(t, ctx, b.Addr, "grown", 0, recs)
	rep, err := jobs.Run(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.RowsOut != 20+21+22 {
		t.Fatalf("second run loaded %d rows, want 63 (20 on the old partition, 21 and 22 on the added ones)", rep.Totals.RowsOut)
	}
	if len(rep.Topics) != 1 || fmt.Sprint(rep.Topics[0].NewPartitions) != "[1 2]" {
		t.Fatalf("run report topics: %+v", rep.Topics)
	}
	for _, pp := range rep.Plan {
		if pp.Partition > 0 && (!pp.New || pp.Start != 0) {
			t.Fatalf("added partition planned %+v", pp)
		}
	}
}
