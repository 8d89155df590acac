package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCreatePartitionsAndAlterConfigs(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, nil)
	ctx := testCtx(t)
	cl := newClient(t, ts.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "grow"); err != nil {
		t.Fatal(err)
	}
	// Partitions: grow to 5, never shrink.
	if r, err := adm.UpdatePartitions(ctx, 5, "grow"); err != nil || r["grow"].Err != nil {
		t.Fatalf("grow to 5: %v %v", err, r["grow"].Err)
	}
	if r, _ := adm.UpdatePartitions(ctx, 3, "grow"); r["grow"].Err != kerr.InvalidPartitions {
		t.Fatalf("shrink to 3: %v", r["grow"].Err)
	}
	producePartition(t, cl, "grow", 4, 3)

	// Incremental: SET, APPEND to a list, invalid values, broker resources.
	set := func(op kadm.IncrementalOp, name, value string) error {
		v := value
		r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: name, Value: &v}}, "grow")
		if err != nil {
			return err
		}
		return r[0].Err
	}
	if err := set(kadm.SetConfig, "retention.ms", "60000"); err != nil {
		t.Fatal(err)
	}
	if err := set(kadm.AppendConfig, "cleanup.policy", "compact"); err != nil {
		t.Fatal(err)
	}
	if err := set(kadm.SetConfig, "retention.ms", "soon"); err != kerr.InvalidConfig {
		t.Fatalf("a bad value: %v", err)
	}
	if err := set(kadm.AppendConfig, "retention.ms", "1"); err != kerr.InvalidConfig {
		t.Fatalf("APPEND to a non-list config: %v", err)
	}
	tp, _ := ts.topics.get("grow")
	lc := tp.parts[4].log.Config()
	if lc.RetentionMs != time.Minute || !lc.Compact || tp.cfg.CleanupPolicy != "delete,compact" && tp.cfg.CleanupPolicy != "compact,delete" {
		t.Fatalf("applied config: retention %v compact %v policy %q", lc.RetentionMs, lc.Compact, tp.cfg.CleanupPolicy)
	}
	v := "1"
	if r, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: &v}}, 0); err != nil || r[0].Err != kerr.InvalidRequest {
		t.Fatalf("broker configs: %v %+v", err, r)
	}
	// Non-incremental: the given set replaces every override.
	seg := "100000"
	if r, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: &seg}}, "grow"); err != nil || r[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %+v", err, r)
	}
	cl.Close()
	ts.stop(t)

	ts = startServer(t, dir, nil)
	tp, _ = ts.topics.get("grow")
	if len(tp.parts) != 5 || tp.overrides["segment.bytes"] != "100000" || len(tp.overrides) != 1 {
		t.Fatalf("after restart: %d partitions, overrides %v", len(tp.parts), tp.overrides)
	}
	if end := tp.parts[4].log.LogEndOffset(); end != 3 {
		t.Fatalf("new partition's records after restart: end %d", end)
	}
}

func FuzzCreatePartitions(f *testing.F)        { fuzzAPI(f, 37) }
func FuzzAlterConfigs(f *testing.F)            { fuzzAPI(f, 33) }
func FuzzIncrementalAlterConfigs(f *testing.F) { fuzzAPI(f, 44) }
