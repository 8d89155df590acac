package mirror_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/mirror"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

func TestMain(m *testing.M) { os.Exit(kafka.Main(m)) }

// rec is what the mirror must keep of a record.
type rec struct {
	offset    int64
	key       []byte
	value     []byte
	nullValue bool
	headers   []kgo.RecordHeader
	timestamp time.Time
}

func (r rec) String() string {
	return fmt.Sprintf("offset %d key %q value %q (null %v) headers %v timestamp %d", r.offset, r.key, r.value, r.nullValue, r.headers, r.timestamp.UnixMilli())
}

func (r rec) same(o rec) bool {
	if !bytes.Equal(r.key, o.key) || !bytes.Equal(r.value, o.value) || r.nullValue != o.nullValue ||
		r.timestamp.UnixMilli() != o.timestamp.UnixMilli() || len(r.headers) != len(o.headers) {
		return false
	}
	for i := range r.headers {
		if r.headers[i].Key != o.headers[i].Key || !bytes.Equal(r.headers[i].Value, o.headers[i].Value) {
			return false
		}
	}
	return true
}

func client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(client(t, addr)).CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create topic %s on %s: %v", topic, addr, err)
	}
}

// readCommitted reads every committed record of topic, per partition, up
// to the end offsets listed first.
func readCommitted(t testing.TB, addr, topic string) map[int32][]rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, addr))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets of %s on %s: %v", topic, addr, err)
	}
	starts := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		starts[o.Partition] = kgo.NewOffset().AtStart()
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	out := map[int32][]rec{}
	for p := range starts {
		out[p] = nil
	}
	if len(left) == 0 {
		return out
	}
	cl := client(t, addr, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s on %s: still waiting for partitions %v", topic, addr, left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("read %s/%d on %s: %v", topic, p, addr, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], rec{offset: r.Offset, key: r.Key, value: r.Value,
					nullValue: r.Value == nil, headers: r.Headers, timestamp: r.Timestamp})
			}
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// sameRecords fails t unless target holds exactly source's records, in
// the same order in each partition.
func sameRecords(t testing.TB, topic string, source, target map[int32][]rec) {
	t.Helper()
	if d := diffRecords(topic, source, target); d != "" {
		t.Fatal(d)
	}
}

// diffRecords describes the first difference between source's and
// target's records ("" when target holds exactly source's, in order).
func diffRecords(topic string, source, target map[int32][]rec) string {
	if len(source) != len(target) {
		return fmt.Sprintf("%s: %d partitions on the source, %d on the target", topic, len(source), len(target))
	}
	var ps []int32
	for p := range source {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		s, d := source[p], target[p]
		for i := 0; i < len(s) && i < len(d); i++ {
			if !s[i].same(d[i]) {
				return fmt.Sprintf("%s/%d: record %d differs:\n source %v\n target %v", topic, p, i, s[i], d[i])
			}
		}
		if len(s) != len(d) {
			return fmt.Sprintf("%s/%d: %d records on the source, %d on the target", topic, p, len(s), len(d))
		}
	}
	return ""
}

// runMirror runs a mirror in this process until ctx ends or it fails.
func runMirror(t testing.TB, ctx context.Context, cfg mirror.Config) <-chan error {
	t.Helper()
	m, err := mirror.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return done
}

// waitCaughtUp waits until mirror name's committed position reached the
// source's end in every partition of topics.
func waitCaughtUp(t testing.TB, from, to, name string, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, from))
	for {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatalf("list the source's end offsets: %v", err)
		}
		st, err := mirror.ReadState(ctx, []kgo.Opt{kgo.SeedBrokers(to)}, mirror.CheckpointTopic(name))
		if err != nil {
			t.Fatalf("read the mirror's state: %v", err)
		}
		behind := ""
		ends.Each(func(o kadm.ListedOffset) {
			var at int64
			if pos := st.Positions[mirror.Partition{Topic: o.Topic, Partition: o.Partition}]; pos != nil {
				at = pos.Source
			}
			if at < o.Offset && behind == "" {
				behind = fmt.Sprintf("%s/%d at %d of %d", o.Topic, o.Partition, at, o.Offset)
			}
		})
		if behind == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the mirror did not catch up in 60 s: %s", behind)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func selection(pattern string) mirror.Selection {
	return mirror.Selection{Topics: regexp.MustCompile(pattern)}
}
