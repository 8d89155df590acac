package sluice

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CreateTopic creates topic with the given partitions.
func CreateTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// Produce writes n records to each partition, valued {"id": "<partition>-<seq>"}
// with seq from first, log timestamps at, at+step, ...
func Produce(t testing.TB, addr, topic string, partitions int32, first, n int, at time.Time, step time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			v, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%d-%d", p, first+i)})
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: v, Timestamp: at.Add(time.Duration(i) * step)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// LoadedIDs returns every record id in the committed JSON-lines files under
// out (not under _sluice) with how often it appears.
func LoadedIDs(out string) map[string]int {
	seen := map[string]int{}
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".jsonl") || strings.Contains(p, "_sluice") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // moved meanwhile
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var v map[string]any
			if json.Unmarshal([]byte(line), &v) == nil {
				seen[fmt.Sprint(v["id"])]++
			}
		}
		return nil
	})
	return seen
}
