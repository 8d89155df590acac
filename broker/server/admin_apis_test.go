package server

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func producePartition(t *testing.T, cl *kgo.Client, topic string, partition int32, n int) {
	t.Helper()
	ctx := testCtx(t)
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeleteRecordsAndLogDirs(t *testing.T) {
	ts := startServer(t, "", nil)
	ctx := testCtx(t)
	cl := newClient(t, ts.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "dr"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadmStr("compact")}, "table"); err != nil {
		t.Fatal(err)
	}
	producePartition(t, cl, "dr", 0, 10)
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 4})
	o.Add(kadm.Offset{Topic: "dr", Partition: 1, At: 5})    // above the high watermark 0
	o.Add(kadm.Offset{Topic: "table", Partition: 0, At: 0}) // compact-only
	res, err := adm.DeleteRecords(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]error{"dr/0": nil, "dr/1": kerr.OffsetOutOfRange, "table/0": kerr.PolicyViolation}
	res.Each(func(r kadm.DeleteRecordsResponse) {
		key := r.Topic + "/" + string(rune('0'+r.Partition))
		if r.Err != want[key] {
			t.Errorf("%s: %v, want %v", key, r.Err, want[key])
		}
		if key == "dr/0" && r.LowWatermark != 4 {
			t.Errorf("low watermark %d, want 4", r.LowWatermark)
		}
	})
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup("dr", 0); s.Offset != 4 {
		t.Fatalf("log start after DeleteRecords: %d", s.Offset)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64 = -1
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "dr" && p.Partition == 0 {
				size = p.Size
			}
		})
	})
	if size <= 0 {
		t.Fatalf("DescribeLogDirs size of dr-0: %d", size)
	}
}

func TestDescribeClusterAndOffsetForLeaderEpoch(t *testing.T) {
	ts := startServer(t, "", nil)
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version, dc.EndpointType = 1, 1
	r := roundTrip(t, ts.addr, dc).(*kmsg.DescribeClusterResponse)
	if r.ErrorCode != 0 || len(r.Brokers) != 1 || r.ControllerID != 0 || r.ClusterID == "" {
		t.Fatalf("DescribeCluster: %+v", r)
	}
	cl := newClient(t, ts.addr, kgo.DefaultProduceTopic("epochs"))
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 1, 1, nil, "epochs"); err != nil {
		t.Fatal(err)
	}
	producePartition(t, cl, "epochs", 0, 3)
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "epochs"
	for _, c := range []struct{ current, epoch int32 }{{0, 0}, {5, 0}, {-1, 3}} {
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.CurrentLeaderEpoch, p.LeaderEpoch = c.current, c.epoch
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp := roundTrip(t, ts.addr, req).(*kmsg.OffsetForLeaderEpochResponse)
	// Partitions are answered once each: only the first survives.
	ps := resp.Topics[0].Partitions
	if len(ps) != 1 || ps[0].ErrorCode != 0 || ps[0].EndOffset != 3 || ps[0].LeaderEpoch != 0 {
		t.Fatalf("OffsetForLeaderEpoch: %+v", ps)
	}
	req.Topics[0].Partitions = req.Topics[0].Partitions[1:2]
	if ps := roundTrip(t, ts.addr, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions; ps[0].ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("a future leader epoch: %+v", ps)
	}
}

// TestUnservedKeysGetAnErrorCode sends every API key kmsg knows and sluice
// does not serve: those whose response has a top-level error code are
// answered UNSUPPORTED_VERSION and the connection stays usable.
func TestUnservedKeysGetAnErrorCode(t *testing.T) {
	ts := startServer(t, "", nil)
	answered, closed := 0, []string{}
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil || lookupAPI(key) != nil {
			continue
		}
		req.SetVersion(req.MaxVersion())
		resp := req.ResponseKind()
		field := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
		rc := dialRaw(t, ts.addr)
		rc.send(encodeRequest(req, 7))
		_, ok := rc.recv()
		if field.IsValid() != ok {
			t.Errorf("key %d (%s): answered %v, has a top-level error code %v", key, kmsg.NameForKey(key), ok, field.IsValid())
		}
		if ok {
			answered++
			got := roundTrip(t, ts.addr, req)
			if code := reflect.ValueOf(got).Elem().FieldByName("ErrorCode").Int(); code != int64(kerr.UnsupportedVersion.Code) {
				t.Errorf("key %d: error code %d", key, code)
			}
		} else {
			closed = append(closed, kmsg.NameForKey(key))
		}
	}
	t.Logf("%d unserved keys answered UNSUPPORTED_VERSION; closed (no top-level error code): %v", answered, closed)
	if answered == 0 {
		t.Fatal("no unserved key was answered")
	}
}

func FuzzDeleteRecords(f *testing.F)        { fuzzAPI(f, 21) }
func FuzzOffsetForLeaderEpoch(f *testing.F) { fuzzAPI(f, 23) }
func FuzzDescribeLogDirs(f *testing.F)      { fuzzAPI(f, 35) }
func FuzzDescribeCluster(f *testing.F)      { fuzzAPI(f, 60) }
