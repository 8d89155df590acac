package broker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/config"
	plog "github.com/sluicehq/sluice/broker/log"
)

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// documentedLogMetrics returns the sluice_log_* names the README's metrics
// section lists, with {a,b} groups expanded.
func documentedLogMetrics(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile("`(sluice_log_[a-z_{},]+)`").FindAllStringSubmatch(string(readme), -1) {
		names = append(names, expandBraces(m[1])...)
	}
	if len(names) == 0 {
		t.Fatal("the README documents no sluice_log_ metric")
	}
	return names
}

func expandBraces(s string) []string {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return []string{s}
	}
	j := strings.IndexByte(s[i:], '}') + i
	var out []string
	for _, alt := range strings.Split(s[i+1:j], ",") {
		out = append(out, expandBraces(s[:i]+alt+s[j+1:])...)
	}
	return out
}

// TestRunServesMetricsAndShutsDown: a started broker serves Kafka clients
// and /metrics with every sluice_log_* metric the README documents (and
// every one broker/log exports); cancelling Run's context shuts it down
// cleanly and releases the data directory.
func TestRunServesMetricsAndShutsDown(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Options{DataDir: dir, Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", Config: config.Default(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- b.Run(ctx) }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.DefaultProduceTopic("m"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	resp, err := http.Get("http://" + b.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := append(documentedLogMetrics(t), plog.MetricNames()...)
	want = append(want, "sluice_broker_requests_total", "sluice_broker_log_end_offset")
	for _, name := range want {
		if !regexp.MustCompile(`(?m)^` + name + `(\{| )`).Match(body) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := os.Stat(dir + "/.clean-shutdown"); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
	// The data directory is free again; a listen error releases it too.
	b2, err := Start(Options{DataDir: dir, Listen: "127.0.0.1:0", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Options{DataDir: t.TempDir(), Listen: b2.Addr().String(), Logger: testLogger()}); err == nil {
		t.Fatal("started on a taken address")
	}
	if err := b2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b3, err := Start(Options{DataDir: dir, Listen: "127.0.0.1:0", Logger: testLogger()})
	if err != nil {
		t.Fatalf("data directory still locked: %v", err)
	}
	_ = b3.Shutdown(context.Background())
}
