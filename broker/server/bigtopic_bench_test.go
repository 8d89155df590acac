package server

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkBigTopic times CreateTopics, a clean restart and DeleteTopics of
// one topic with SLUICE_BIG_PARTITIONS (default 65,536) partitions on the
// real disk.
func BenchmarkBigTopic(b *testing.B) {
	n := int32(65536)
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BIG_PARTITIONS")); err == nil && v > 0 {
		n = int32(v)
	}
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		s, err := New(Options{DataDir: dir, Logger: testLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, code, msg := s.topics.create("big", n, nil, nil, false); code != 0 {
			b.Fatal(msg)
		}
		create := time.Since(start)
		start = time.Now()
		if err := s.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		shutdown := time.Since(start)
		start = time.Now()
		s, err = New(Options{DataDir: dir, Logger: testLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		restart := time.Since(start)
		start = time.Now()
		if code, msg := s.topics.delete("big"); code != 0 {
			b.Fatal(msg)
		}
		del := time.Since(start)
		_ = s.Shutdown(context.Background())
		b.ReportMetric(create.Seconds(), "create-s")
		b.ReportMetric(shutdown.Seconds(), "shutdown-s")
		b.ReportMetric(restart.Seconds(), "restart-s")
		b.ReportMetric(del.Seconds(), "delete-s")
	}
}
