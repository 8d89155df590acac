package interop

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// sluiceCLI runs the built sluice binary with args and stdin.
func sluiceCLI(t *testing.T, ctx context.Context, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, kafka.SluiceBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func mustCLI(t *testing.T, ctx context.Context, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := sluiceCLI(t, ctx, stdin, args...)
	if err != nil {
		t.Fatalf("sluice %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// cliRoundTrip drives the sluice CLI tools against any Kafka-protocol broker:
// topics create/list/describe/delete, produce with keys and each codec,
// consume with formats, partitions and offsets, and bench.
func cliRoundTrip(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := "--bootstrap=" + bootstrap
	topic := fmt.Sprintf("cli-%d", time.Now().UnixNano())

	if out := mustCLI(t, ctx, "", "topics", "create", topic, b, "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=3600000"); !strings.Contains(out, "created topic "+topic) {
		t.Fatalf("create printed %q", out)
	}
	if _, errOut, err := sluiceCLI(t, ctx, "", "topics", "create", topic, b); err == nil {
		t.Fatal("creating an existing topic must fail")
	} else if strings.Count(strings.TrimSpace(errOut), "\n") != 0 || errOut == "" {
		t.Fatalf("want a one-line reason, got %q", errOut)
	}
	if out := mustCLI(t, ctx, "", "topics", "list", b); !strings.Contains(out, topic+"\n") {
		t.Fatalf("list printed %q, want %s", out, topic)
	}

	var want []string
	for i, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var in strings.Builder
		for j := 0; j < 20; j++ {
			fmt.Fprintf(&in, "k%d-%d|%s value %d with | bars\n", i, j, codec, j)
			want = append(want, fmt.Sprintf("k%d-%d\t%s value %d with | bars", i, j, codec, j))
		}
		mustCLI(t, ctx, in.String(), "produce", b, "--topic", topic, "--key-separator", "|", "--compression", codec, "--partition", fmt.Sprint(i%3), "-q")
	}
	out := mustCLI(t, ctx, "", "consume", b, "--topic", topic, "--format", `%k\t%v\n`, "-e", "-q")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	assertSameSet(t, got, want)

	// One partition, from an offset, limited.
	out = mustCLI(t, ctx, "", "consume", b, "--topic", topic, "--partition", "1", "--from", "5", "--max", "3", "--format", `%p:%o:%k\n`, "-q")
	if out != "1:5:k1-5\n1:6:k1-6\n1:7:k1-7\n" {
		t.Fatalf("partition 1 from 5 max 3 printed %q", out)
	}
	out = mustCLI(t, ctx, "", "consume", b, "--topic", topic, "--partition", "0", "--max", "1", "--format", "json", "-q")
	if !strings.Contains(out, `"key":"k0-0"`) || !strings.Contains(out, `"partition":0`) {
		t.Fatalf("json printed %q", out)
	}
	if out := mustCLI(t, ctx, "", "topics", "describe", topic, b); !strings.Contains(out, "partitions 3") || !strings.Contains(out, "retention.ms=3600000") {
		t.Fatalf("describe printed %q", out)
	}

	// Bad input: non-zero exit with one line.
	for _, args := range [][]string{
		{"consume", b, "--topic", topic, "--from", "yesterday"},
		{"produce", b, "--topic", topic, "--compression", "brotli"},
		{"consume", b, "--topic", topic, "--partition", "9", "-e"},
		{"topics", "create", topic + "-x", b, "--config", "novalue"},
	} {
		_, errOut, err := sluiceCLI(t, ctx, "x\n", args...)
		if err == nil || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || errOut == "" {
			t.Errorf("sluice %v: err %v, stderr %q: want a failure with a one-line reason", args, err, errOut)
		}
	}

	bench := topic + "-bench"
	out = mustCLI(t, ctx, "", "bench", "produce", b, "--topic", bench, "--records", "20000", "--record-size", "100", "--partitions", "2", "--acks", "all", "--compression", "lz4")
	if !strings.Contains(out, "20000 records sent") || !strings.Contains(out, "99.9th") {
		t.Fatalf("bench produce printed %q", out)
	}
	out = mustCLI(t, ctx, "", "bench", "consume", b, "--topic", bench, "--records", "20000")
	if !strings.Contains(out, "20000 records received") {
		t.Fatalf("bench consume printed %q", out)
	}

	if out := mustCLI(t, ctx, "", "topics", "delete", topic, bench, b); !strings.Contains(out, "deleted topic "+topic) {
		t.Fatalf("delete printed %q", out)
	}
}

func assertSameSet(t *testing.T, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	for k, v := range count {
		if v != 0 {
			t.Fatalf("record %q: %+d (got %d records, want %d)", k, v, len(got), len(want))
		}
	}
}

// TestCLIAgainstApacheKafka proves the CLI tools speak to a real Apache
// Kafka 4.1 broker, exactly as they do to sluice.
func TestCLIAgainstApacheKafka(t *testing.T) {
	k := kafka.SharedKafka(t)
	cliRoundTrip(t, k.Addr)
	cliGroupResume(t, k.Addr)
}

// cliGroupResume checks `sluice consume --group`: a second run resumes
// where the first one's commit left off. (Run against Apache Kafka; sluice
// serves groups with the consumer-groups issue.)
func cliGroupResume(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := "--bootstrap=" + bootstrap
	topic := newTopicName("cli-group")
	createTopic(t, bootstrap, topic, 2)
	var in strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&in, "line %02d\n", i)
	}
	mustCLI(t, ctx, in.String(), "produce", b, "--topic", topic, "-q")
	first := mustCLI(t, ctx, "", "consume", b, "--topic", topic, "--group", topic+"-g", "--max", "10", "-q")
	rest := mustCLI(t, ctx, "", "consume", b, "--topic", topic, "--group", topic+"-g", "-e", "-q")
	all := strings.Split(strings.TrimSuffix(first+rest, "\n"), "\n")
	if strings.Count(first, "\n") != 10 || len(all) != 30 {
		t.Fatalf("first run %d lines, both runs %d lines; want 10 and 30:\n%s---\n%s", strings.Count(first, "\n"), len(all), first, rest)
	}
	var want []string
	for i := 0; i < 30; i++ {
		want = append(want, fmt.Sprintf("line %02d", i))
	}
	assertSameSet(t, all, want)
	if _, errOut, err := sluiceCLI(t, ctx, "", "consume", b, "--topic", topic, "--group", "g", "--partition", "0"); err == nil {
		t.Fatalf("--group with --partition must fail, stderr %q", errOut)
	}
}
