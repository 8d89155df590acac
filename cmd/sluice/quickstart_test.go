package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestQuickstart runs `sluice quickstart` and checks its output: every page
// view produced is counted once by the closing query, the complete hours
// have _SUCCESS, and `sluice runs list` shows the two runs.
func TestQuickstart(t *testing.T) {
	dir := t.TempDir()
	out, err := runCLI(t, "quickstart", "--dir", dir, "--events", "6000")
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out)
	}
	perHour := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d\s+\d+\s+(\d+)\s`)
	total := 0
	for _, m := range perHour.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	if total != 6500 {
		t.Fatalf("the per-hour query counts %d page views, want 6500:\n%s", total, out)
	}
	for _, want := range []string{"==> sluice query: top pages", "complete hours (_SUCCESS written): ", "everything stopped"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	markers, _ := filepath.Glob(filepath.Join(dir, "warehouse", "pageviews", "dt=*", "hr=*", "_SUCCESS"))
	if len(markers) < 2 {
		t.Fatalf("%d _SUCCESS markers, want at least 2", len(markers))
	}
	runs, err := runCLI(t, "runs", "list", filepath.Join(dir, "jobs", "pageviews-hourly.yaml"))
	if err != nil || strings.Count(runs, "succeeded") < 2 {
		t.Fatalf("runs list: %v\n%s", err, runs)
	}
	if _, err := os.Stat(filepath.Join(dir, "quickstart.log")); err != nil {
		t.Fatal(err)
	}
}

func TestQuickstartBrokerOnly(t *testing.T) {
	out, err := runCLI(t, "quickstart", "--broker-only", "--dir", t.TempDir(), "--events", "3000")
	if err != nil || !strings.Contains(out, "read back 3000 of 3000 records") {
		t.Fatalf("quickstart --broker-only: %v\n%s", err, out)
	}
}
