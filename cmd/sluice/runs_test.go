package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// legacyRun is a run record as the previous version wrote it, in
// _sluice/history/<job>/ (bytes fixed here).
const legacyRun = `{
  "version": 1,
  "id": "20261201T100000Z-a1b2c3",
  "job": "pv-legacy",
  "scheduled": "2026-12-01T10:00:00Z",
  "started": "2026-12-01T10:00:00Z",
  "ended": "2026-12-01T10:00:02.5Z",
  "state": "failed",
  "error": "1 of 1 tasks failed after their retries; the next run resumes from the checkpoint. pv/0 [0, 50): injected",
  "records": 0,
  "bytes": 0,
  "lag": 50,
  "tasks": [
    {
      "topic": "pv",
      "partition": 0,
      "start": 0,
      "end": 50,
      "state": "failed",
      "attempts": 3,
      "error": "injected",
      "records": 0,
      "bytes": 0,
      "committed": false,
      "millis": 2500
    }
  ],
  "scheduler": "host/42"
}`

// TestRunsListReadsTheLegacyFolder: `sluice runs list` on an output whose
// runs the previous version recorded under _sluice/history/<job>/ lists
// them, with the reasons of the failed one.
func TestRunsListReadsTheLegacyFolder(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	legacy := filepath.Join(out, "_sluice", "history", "pv-legacy")
	if err := os.MkdirAll(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, "20261201T100000Z-a1b2c3.json"), []byte(legacyRun), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "pv-legacy.yaml")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`name: pv-legacy
source: {bootstrap: [127.0.0.1:1], topics: [pv]}
decode: {format: json}
output: {uri: file://%s, format: jsonl}
schedule: "@hourly"
`, out)), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := runCLI(t, "runs", "list", spec)
	if err != nil {
		t.Fatalf("runs list: %v\n%s", err, got)
	}
	for _, want := range []string{"20261201T100000Z-a1b2c3", "failed", "1 (1 not done)", "task pv/0 [0, 50) failed after 3 attempts: injected"} {
		if !strings.Contains(got, want) {
			t.Fatalf("runs list does not show %q:\n%s", want, got)
		}
	}
}
