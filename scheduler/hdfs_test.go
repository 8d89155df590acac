package scheduler_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
	"github.com/sluicehq/sluice/writers/filesystem"
)

func TestMain(m *testing.M) { os.Exit(hdfs.Main(m)) }

// TestHDFSOutput: run history and completeness markers go through
// writers/filesystem, so a job writing to HDFS (a real MiniDFSCluster) gets
// them there.
func TestHDFSOutput(t *testing.T) {
	nn := hdfs.Start(t)
	h := newHarness(t)
	h.out = fmt.Sprintf("hdfs://%s/scheduler-%d", nn, time.Now().UnixNano())
	sluice.Produce(t, h.addr, "pv", 2, 0, 30, h.clock.Now().Add(-2*time.Hour), time.Second)
	writeSpec(t, h.jobs, "pv-hdfs", h.addr, "pv", h.out, "@every 2s", "")
	h.start()
	h.clock.Advance(2 * time.Second)
	r := h.ended("pv-hdfs", 1)[0]
	h.stop()
	if r.State != scheduler.StateSucceeded || r.Records != 60 {
		t.Fatalf("run: %+v", r)
	}
	fs, err := filesystem.Open(h.out)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if st, err := fs.Stat("dt=2026-12-01/hr=08/" + scheduler.SuccessMarker); err != nil || st.Size != 0 {
		t.Fatalf("no empty _SUCCESS for hour 08 on HDFS: %+v %v", st, err)
	}
	b, err := vfs.ReadFile(fs, "dt=2026-12-01/hr=08/"+scheduler.SuccessInfo)
	var s scheduler.SuccessRecord
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil || s.Records != 60 {
		t.Fatalf("hour 08 on HDFS: %v %+v", err, s)
	}
	if ok, _ := vfs.Exists(fs, "dt=2026-12-01/hr=09/"+scheduler.SuccessMarker); ok {
		t.Fatal("hour 09 marked at 10:00:02 with 10m of lateness")
	}
}
