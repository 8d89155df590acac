package scheduler_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// legacyEnded and legacyRunning are run records as the previous version
// wrote them under _sluice/history/<job>/ (bytes fixed here, not made by
// the code under test).
const (
	legacyEnded = `{
  "version": 1,
  "id": "20261201T100000Z-a1b2c3",
  "job": "pv",
  "scheduled": "2026-12-01T10:00:00Z",
  "started": "2026-12-01T10:00:00.5Z",
  "ended": "2026-12-01T10:00:03Z",
  "state": "succeeded",
  "records": 240,
  "bytes": 9120,
  "lag": 240,
  "partitions": [
    {
      "topic": "pv",
      "partition": 0,
      "loaded": 0,
      "high_watermark": 120
    }
  ],
  "tasks": [
    {
      "topic": "pv",
      "partition": 0,
      "start": 0,
      "end": 120,
      "state": "succeeded",
      "attempts": 2,
      "error": "",
      "records": 120,
      "bytes": 4560,
      "committed": true,
      "millis": 1500
    }
  ],
  "complete": [
    "dt=2026-12-01/hr=08"
  ],
  "scheduler": "host/42"
}`
	legacyRunning = `{
  "version": 1,
  "id": "20261201T110000Z-d4e5f6",
  "job": "pv",
  "scheduled": "2026-12-01T11:00:00Z",
  "started": "2026-12-01T11:00:00Z",
  "state": "running",
  "records": 0,
  "bytes": 0,
  "lag": 0,
  "scheduler": "host/42"
}`
)

// TestHistoryReadsTheLegacyFolder: an output whose runs the previous
// version recorded under _sluice/history/<job>/ still lists them; a run of
// theirs that ends now (abandoned) and every new run are written under
// _sluice/runs/<job>/ only, and the listing shows each run once.
func TestHistoryReadsTheLegacyFolder(t *testing.T) {
	out := t.TempDir()
	legacy := filepath.Join(out, "_sluice", "history", "pv")
	if err := os.MkdirAll(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{
		"20261201T100000Z-a1b2c3.json":         legacyEnded,
		"20261201T110000Z-d4e5f6.running.json": legacyRunning,
	} {
		if err := os.WriteFile(filepath.Join(legacy, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := filesystem.Open("file://" + out)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	h := scheduler.NewHistory(fs, "pv")

	runs, err := h.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ID != "20261201T100000Z-a1b2c3" || runs[1].State != scheduler.StateRunning {
		t.Fatalf("legacy runs: %+v", runs)
	}
	r := runs[0]
	if r.State != scheduler.StateSucceeded || r.Records != 240 || r.Lag != 240 || len(r.Tasks) != 1 ||
		r.Tasks[0].Attempts != 2 || r.Tasks[0].End != 120 || !r.Tasks[0].Committed || len(r.Complete) != 1 ||
		!r.Ended.Equal(time.Date(2026, 12, 1, 10, 0, 3, 0, time.UTC)) {
		t.Fatalf("legacy ended run read as %+v", r)
	}
	last, ok, err := h.Last()
	if err != nil || !ok || last.ID != "20261201T110000Z-d4e5f6" {
		t.Fatalf("last: %+v %v %v", last, ok, err)
	}

	// The previous version's scheduler died: its running run is abandoned,
	// and its end is recorded in the current folder.
	if err := h.Abandon(nil, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(legacy, "20261201T110000Z-d4e5f6.running.json")); !os.IsNotExist(err) {
		t.Fatalf("the legacy running record is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "_sluice", "runs", "pv", "20261201T110000Z-d4e5f6.json")); err != nil {
		t.Fatalf("the abandoned run's end is not under _sluice/runs/pv: %v", err)
	}
	// A new run starts and ends in the current folder.
	next := scheduler.RunRecord{ID: "20261201T130000Z-000001", Job: "pv", State: scheduler.StateRunning,
		Scheduled: time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)}
	if err := h.Start(next); err != nil {
		t.Fatal(err)
	}
	next.State, next.Records = scheduler.StateSucceeded, 7
	if err := h.Finish(next); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(legacy); len(ents) != 1 {
		t.Fatalf("the legacy folder holds %d files, want its one ended run (nothing new written there)", len(ents))
	}
	runs, err = h.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{scheduler.StateSucceeded, scheduler.StateAbandoned, scheduler.StateSucceeded}
	if len(runs) != len(want) {
		t.Fatalf("%d runs, want %d: %+v", len(runs), len(want), runs)
	}
	for i, st := range want {
		if runs[i].State != st {
			t.Fatalf("run %d (%s) is %s, want %s", i, runs[i].ID, runs[i].State, st)
		}
	}
	if runs[2].Records != 7 {
		t.Fatalf("new run: %+v", runs[2])
	}
}
