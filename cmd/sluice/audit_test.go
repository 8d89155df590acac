package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// runSluiceIn runs one sluice command in process and returns its stdout;
// a failure's error carries what the command wrote to stderr.
func runSluiceIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	root.SetArgs(args)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	err := root.Execute()
	if err != nil && errOut.Len() > 0 {
		err = fmt.Errorf("%w\n%s", err, errOut.String())
	}
	return out.String(), err
}

// hookProduce produces n records to topic through a franz-go client with
// the audit Hook (the third producer tier), timestamps at, at+step, ...,
// and publishes the counts.
func hookProduce(t *testing.T, addr, topic string, n int, at time.Time, step time.Duration) {
	t.Helper()
	p, err := audit.StartProducer([]kgo.Opt{kgo.SeedBrokers(addr)}, audit.DefaultWindow, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.WithHooks(p.Hook))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"n":%d}`, i)), Timestamp: at.Add(time.Duration(i) * step)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func writeAuditJob(t *testing.T, dir, name, addr, topic, extra string) string {
	t.Helper()
	spec := filepath.Join(dir, name+".yaml")
	body := fmt.Sprintf("name: %s\nsource: {bootstrap: [%s], topics: [%s]%s}\ndecode: {format: bytes}\noutput: {uri: file://%s, format: jsonl}\n",
		name, addr, topic, extra, filepath.Join(dir, name+"-out"))
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// auditJSON runs `sluice audit --json` and parses its report; err is the
// command's (errUnbalanced when a window does not balance).
func auditJSON(t *testing.T, args ...string) (audit.Report, error) {
	t.Helper()
	out, err := runSluiceIn(t, "", append([]string{"audit", "--json", "--since", "0"}, args...)...)
	var rep audit.Report
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		t.Fatalf("audit --json: %v\n%s\n%v", jerr, out, err)
	}
	return rep, err
}

func tierTotal(rep audit.Report, tier audit.Tier) int64 {
	var n int64
	for _, w := range rep.Windows {
		n += w.Tiers[tier].Messages
	}
	return n
}

// Records produced by each producer tier (sluice produce --audit, sluice
// bench produce --audit, a franz-go client with the Hook) and loaded by a
// job: `sluice audit` balances every window, producer count = load count =
// records produced.
func TestAuditBalancesEveryTier(t *testing.T) {
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	sluice.CreateTopic(t, b.Addr, "pv", 2)
	dir := t.TempDir()
	var lines strings.Builder
	for i := range 50 {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	if _, err := runSluiceIn(t, lines.String(), "produce", "--audit", "-q", "--bootstrap", b.Addr, "-t", "pv", "--progress-interval", "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := runSluiceIn(t, "", "bench", "produce", "--audit", "--bootstrap", b.Addr, "-t", "pv", "--records", "300", "--record-size", "40", "--report-interval", "1h"); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	hookProduce(t, b.Addr, "pv", 120, old, time.Minute) // 12 old windows
	job := writeAuditJob(t, dir, "pv-load", b.Addr, "pv", "")

	// Before the load: the old windows are missing from the load tier.
	rep, err := auditJSON(t, "--job", job, "--lateness", "0")
	if !errors.Is(err, errUnbalanced) || rep.Unbalanced < 12 {
		t.Fatalf("before loading: err %v, %d unbalanced windows; want >= 12 and errUnbalanced", err, rep.Unbalanced)
	}
	if _, err := runSluiceIn(t, "", "load", "run", job, "--quiet"); err != nil {
		t.Fatal(err)
	}
	rep, err = auditJSON(t, "--job", job, "--lateness", "0")
	if err != nil {
		t.Fatalf("after loading: %v", err)
	}
	if p, l := tierTotal(rep, audit.TierProducer), tierTotal(rep, audit.TierLoad); p != 470 || l != 470 {
		t.Fatalf("producer tier %d, load tier %d records; want 470 each", p, l)
	}
	for _, w := range rep.Windows {
		if w.State != audit.StateBalanced || w.Diff[audit.TierLoad] != 0 {
			t.Errorf("window %s %s: %s, diff %d", w.Topic, w.Start, w.State, w.Diff[audit.TierLoad])
		}
	}
	if len(rep.Windows) < 13 {
		t.Errorf("%d windows, want the 12 old ones and the current one(s)", len(rep.Windows))
	}
	// The text report says the same.
	out, err := runSluiceIn(t, "", "audit", "--job", job, "--since", "0")
	if err != nil || !strings.Contains(out, "0 unbalanced") || !strings.Contains(out, "LOAD") {
		t.Fatalf("text report: %v\n%s", err, out)
	}
}

// Records deleted before they were loaded, under on_offset_out_of_range:
// skip: the audit shows exactly that many missing, attributed to the
// skipped range, and fails.
func TestAuditAttributesTheSkippedRange(t *testing.T) {
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	sluice.CreateTopic(t, b.Addr, "cut", 1)
	dir := t.TempDir()
	at := time.Now().Add(-5 * time.Hour).Truncate(time.Hour)
	hookProduce(t, b.Addr, "cut", 20, at, time.Minute)
	job := writeAuditJob(t, dir, "cut-load", b.Addr, "cut", ", on_offset_out_of_range: skip")
	if _, err := runSluiceIn(t, "", "load", "run", job, "--quiet"); err != nil {
		t.Fatal(err)
	}
	hookProduce(t, b.Addr, "cut", 80, at.Add(20*time.Minute), time.Minute)
	if out, err := runSluiceIn(t, "", "topics", "delete-records", "cut", "--partition", "0", "--before", "50", "--bootstrap", b.Addr); err != nil || !strings.Contains(out, "log start offset now 50") {
		t.Fatalf("delete-records: %v %s", err, out)
	}
	if _, err := runSluiceIn(t, "", "load", "run", job, "--quiet"); err != nil {
		t.Fatal(err)
	}
	rep, err := auditJSON(t, "--job", job, "--lateness", "0")
	if !errors.Is(err, errUnbalanced) {
		t.Fatalf("audit: %v, want errUnbalanced", err)
	}
	var missing int64
	for _, w := range rep.Windows {
		d := w.Diff[audit.TierLoad]
		if d == 0 {
			continue
		}
		missing -= d
		if w.State != audit.StateMissing || !strings.Contains(strings.Join(w.Reasons, ";"), "deleted by retention before loading") {
			t.Errorf("window %s: %s %v, want missing and attributed to retention", w.Start, w.State, w.Reasons)
		}
	}
	if missing != 30 {
		t.Errorf("%d records missing, want exactly the 30 deleted", missing)
	}
	if len(rep.Skips) != 1 || rep.Skips[0] != (audit.Skip{Topic: "cut", Partition: 0, Start: 20, End: 50}) {
		t.Errorf("skipped ranges %+v, want cut/0 [20, 50)", rep.Skips)
	}
	if tierTotal(rep, audit.TierProducer) != 100 || tierTotal(rep, audit.TierLoad) != 70 {
		t.Errorf("producer %d, load %d; want 100 and 70", tierTotal(rep, audit.TierProducer), tierTotal(rep, audit.TierLoad))
	}
}

// Late records for a window already loaded: the window is pending within
// the lateness (the command succeeds), missing past it (it fails), and
// balanced once they are loaded.
func TestAuditLateRecordsTurnPendingIntoBalanced(t *testing.T) {
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	sluice.CreateTopic(t, b.Addr, "late", 1)
	dir := t.TempDir()
	at := time.Now().Add(-2 * time.Hour).Truncate(10 * time.Minute)
	hookProduce(t, b.Addr, "late", 10, at, time.Second)
	job := writeAuditJob(t, dir, "late-load", b.Addr, "late", "")
	if _, err := runSluiceIn(t, "", "load", "run", job, "--quiet"); err != nil {
		t.Fatal(err)
	}
	if _, err := auditJSON(t, "--job", job, "--lateness", "0"); err != nil {
		t.Fatalf("after the first load: %v", err)
	}
	hookProduce(t, b.Addr, "late", 5, at.Add(time.Minute), time.Second) // late, same window
	rep, err := auditJSON(t, "--job", job, "--lateness", "10h")
	if err != nil || len(rep.Windows) != 1 || rep.Windows[0].State != audit.StatePending || rep.Windows[0].Diff[audit.TierLoad] != -5 {
		t.Fatalf("within the lateness: %v %+v; want one pending window 5 short", err, rep.Windows)
	}
	if rep, err = auditJSON(t, "--job", job, "--lateness", "1m"); !errors.Is(err, errUnbalanced) || rep.Windows[0].State != audit.StateMissing {
		t.Fatalf("past the lateness: %v %+v; want missing", err, rep.Windows)
	}
	if _, err := runSluiceIn(t, "", "load", "run", job, "--quiet"); err != nil {
		t.Fatal(err)
	}
	rep, err = auditJSON(t, "--job", job, "--lateness", "10h")
	if err != nil || rep.Windows[0].State != audit.StateBalanced || rep.Windows[0].Tiers[audit.TierLoad].Messages != 15 {
		t.Fatalf("after loading the late records: %v %+v; want balanced with 15", err, rep.Windows)
	}
}
