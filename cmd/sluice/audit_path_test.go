package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// auditedBroker starts a sluice broker with the broker audit tier on,
// publishing every 100 ms.
func auditedBroker(t *testing.T) *sluice.Broker {
	t.Helper()
	cfg := config.Default()
	cfg.AuditEnable = true
	cfg.AuditPublishIntervalMs = 100
	return sluice.StartBroker(t, sluice.BrokerOptions{Config: &cfg})
}

// pathTiers are the tiers the whole path must balance at.
var pathTiers = []audit.Tier{audit.TierSourceBroker, audit.TierMirror, audit.TierBroker, audit.TierLoad}

// awaitWholePath runs `sluice audit --source-bootstrap A --bootstrap B
// --job JOB` until every window balances at every tier of the path (the
// brokers publish every 100 ms) and returns the last report.
func awaitWholePath(t *testing.T, a, b, job string, produced int64) audit.Report {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := auditJSON(t, "--job", job, "--bootstrap", b, "--source-bootstrap", a, "--lateness", "0")
		ok := err == nil && rep.Unbalanced == 0 && rep.Pending == 0 && tierTotal(rep, audit.TierProducer) == produced
		for _, w := range rep.Windows {
			if w.State == audit.StateClock {
				continue // the brokers' appends by their clock: shown, not balanced
			}
			for _, tier := range pathTiers {
				if _, counted := w.Tiers[tier]; !counted || w.Diff[tier] != 0 {
					ok = false
				}
			}
		}
		if ok {
			return rep
		}
		if time.Now().After(deadline) {
			for _, w := range rep.Windows {
				t.Logf("%s %s %s %v diff %v %v", w.Topic, w.Start, w.State, w.Tiers, w.Diff, w.Reasons)
			}
			t.Fatalf("the whole path does not balance: err %v, %d unbalanced, %d pending, producer tier %d of %d records",
				err, rep.Unbalanced, rep.Pending, tierTotal(rep, audit.TierProducer), produced)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func checkPathTotals(t *testing.T, rep audit.Report, produced int64) {
	t.Helper()
	for _, tier := range append([]audit.Tier{audit.TierProducer}, pathTiers...) {
		if n := tierTotal(rep, tier); n != produced {
			t.Errorf("tier %s: %d records, want %d", tier, n, produced)
		}
	}
	if n := tierTotal(rep, audit.TierBrokerClock); n != produced {
		t.Errorf("tier %s (by the broker's clock): %d records, want %d", audit.TierBrokerClock, n, produced)
	}
	if len(rep.Windows) < 10 {
		t.Errorf("%d windows, want the 10 old ones at least", len(rep.Windows))
	}
}

// producer → sluice A → sluice mirror → sluice B → sluice load →
// warehouse, with the broker tier on at both brokers: `sluice audit
// --source-bootstrap A --bootstrap B --job JOB` balances every window at
// every tier (A's broker, the mirror, B's broker, the load), each holding
// exactly the records produced.
func TestAuditWholePath(t *testing.T) {
	a, b := auditedBroker(t), auditedBroker(t)
	sluice.CreateTopic(t, a.Addr, "wp", 2)
	old := time.Now().Add(-4 * time.Hour).Truncate(time.Hour)
	hookProduce(t, a.Addr, "wp", 100, old, time.Minute) // 10 old windows
	hookProduce(t, a.Addr, "wp", 50, time.Now().Add(-time.Minute), time.Millisecond)
	if _, err := runSluiceIn(t, "", "mirror", "--from", a.Addr, "--to", b.Addr, "--topics", "wp", "--name", "a-b",
		"--audit", "--exit-when-caught-up", "--progress-interval", "0", "--log-level", "warn"); err != nil {
		t.Fatal(err)
	}
	job := writeAuditJob(t, t.TempDir(), "wp-load", b.Addr, "wp", ", isolation: read_committed")
	if _, err := runSluiceIn(t, "", "load", "run", job, "--quiet"); err != nil {
		t.Fatal(err)
	}
	rep := awaitWholePath(t, a.Addr, b.Addr, job, 150)
	checkPathTotals(t, rep, 150)
	// The metrics of every tier and topic.
	metrics := filepath.Join(t.TempDir(), "audit.prom")
	if _, err := auditJSON(t, "--job", job, "--bootstrap", b.Addr, "--source-bootstrap", a.Addr, "--lateness", "0", "--metrics-file", metrics); err != nil {
		t.Fatal(err)
	}
	prom, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	latestEnd := rep.Windows[len(rep.Windows)-1].End.Unix()
	for _, tier := range pathTiers {
		for _, line := range []string{
			fmt.Sprintf(`sluice_audit_tier_latest_balanced_window_seconds{tier="%s",topic="wp"} %s`, tier, strconv.FormatFloat(float64(latestEnd), 'g', -1, 64)),
			fmt.Sprintf(`sluice_audit_tier_unbalanced_windows{tier="%s",topic="wp"} 0`, tier),
		} {
			if !strings.Contains(string(prom), line+"\n") {
				t.Errorf("--metrics-file lacks %s:\n%s", line, prom)
			}
		}
	}
	// The books of B alone (no --source-bootstrap) hold no producer tier:
	// nothing to balance against, said in a note.
	if _, err := auditJSON(t, "--bootstrap", b.Addr, "--job", job, "--lateness", "0"); err != nil {
		t.Errorf("B's books alone: %v", err)
	}
	// The text report names the tiers in path order.
	out, err := runSluiceIn(t, "", "audit", "--job", job, "--bootstrap", b.Addr, "--source-bootstrap", a.Addr, "--since", "0", "--lateness", "0")
	if err != nil {
		t.Fatalf("text report: %v\n%s", err, out)
	}
	t.Log("\n" + out)
	if !regexp.MustCompile(`PRODUCER +SOURCE-BROKER +DIFF +SOURCE-BROKER-CLOCK +MIRROR +DIFF +BROKER +DIFF +BROKER-CLOCK +LOAD +DIFF`).MatchString(out) {
		t.Errorf("text report's header:\n%s", out)
	}
}

// The whole path with the mirror killed with -9 several times while
// records stream into A: the mirror tier's counts commit with the copies,
// so they are still exact, and B's broker tier counts a transaction's
// records only at its COMMIT marker (the killed mirrors' open transactions
// are aborted by the next one's fencing), so every window still balances
// at every tier.
func TestAuditWholePathMirrorKill9(t *testing.T) {
	bin := kafka.SluiceBinary(t)
	a, b := auditedBroker(t), auditedBroker(t)
	sluice.CreateTopic(t, a.Addr, "wk", 3)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	old := time.Now().Add(-5 * time.Hour).Truncate(time.Hour)

	// The stream: 25 records every 5 ms through the audit Hook, record
	// times 0.5 s apart from 5 hours ago (many windows).
	p, err := audit.StartProducer([]kgo.Opt{kgo.SeedBrokers(a.Addr)}, audit.DefaultWindow, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr), kgo.WithHooks(p.Hook))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	streamed := make(chan int64, 1)
	go func() {
		var n int64
		defer func() { streamed <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			recs := make([]*kgo.Record, 25)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "wk", Value: []byte(fmt.Sprintf(`{"n":%d}`, n)), Timestamp: old.Add(time.Duration(n) * 500 * time.Millisecond)}
				n++
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
		}
	}()

	args := []string{"mirror", "--from", a.Addr, "--to", b.Addr, "--topics", "wk", "--name", "a-b", "--audit",
		"--commit-interval", "50ms", "--progress-interval", "0", "--log-level", "warn"}
	const kills = 8
	for i := range kills {
		var out bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(400+rng.Intn(1000)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("kill %d: the mirror ended before the kill: %v\n%s", i, err, out.String())
		}
	}
	close(stop)
	produced := <-streamed
	cl.Close()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	last := exec.CommandContext(ctx, bin, append(args, "--exit-when-caught-up")...)
	if out, err := last.CombinedOutput(); err != nil {
		t.Fatalf("the last mirror run: %v\n%s", err, out)
	}
	job := writeAuditJob(t, t.TempDir(), "wk-load", b.Addr, "wk", ", isolation: read_committed")
	if _, err := runSluiceIn(t, "", "load", "run", job, "--quiet"); err != nil {
		t.Fatal(err)
	}
	// The kills left aborted copies in B's log: the test would not tell
	// the broker tier's transaction rule from counting every append
	// otherwise.
	aborted := abortedRecords(t, ctx, b.Addr, "wk")
	t.Logf("%d records streamed, %d aborted copies in B's log after %d kills", produced, aborted, kills)
	if aborted == 0 {
		t.Errorf("no aborted copies in B's log: no kill hit an open transaction (seed %d)", seed)
	}
	rep := awaitWholePath(t, a.Addr, b.Addr, job, produced)
	checkPathTotals(t, rep, produced)
}

// abortedRecords counts the data records of topic that a read_uncommitted
// reader sees and a read_committed one does not.
func abortedRecords(t *testing.T, ctx context.Context, addr, topic string) int64 {
	t.Helper()
	count := func(iso kgo.IsolationLevel) int64 {
		adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
		adm.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 {
				want[o.Partition] = o.Offset
			}
		})
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var n int64
		for len(want) > 0 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				if !r.Attrs.IsControl() {
					n++
				}
				if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
					delete(want, r.Partition)
				}
			})
		}
		return n
	}
	return count(kgo.ReadUncommitted()) - count(kgo.ReadCommitted())
}

// The broker tier's guarantee through restarts of a `sluice broker`
// process (audit.enable, publishing every 5 minutes, so only a stop
// publishes): a clean stop publishes what it counted, and the restarted
// process counts under an origin of its own, so nothing is counted twice;
// a kill -9 loses exactly what was appended since the last publish, which
// the audit shows as the broker tier's shortfall, with its reason.
func TestAuditBrokerTierThroughRestarts(t *testing.T) {
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("audit.enable=true\naudit.publish.interval.ms=300000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := kafka.StartSluice(t, "--config", props, "--log-level", "info")
	sluice.CreateTopic(t, s.Addr, "br", 2)
	at := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	hookProduce(t, s.Addr, "br", 100, at, 6*time.Second) // window 0 of the hour
	s.Restart(t)                                         // SIGTERM: published
	hookProduce(t, s.Addr, "br", 50, at.Add(10*time.Minute), 6*time.Second)
	s.Kill() // the 50 of window 1 are appended, never published
	s.Restart(t)
	hookProduce(t, s.Addr, "br", 30, at.Add(20*time.Minute), 6*time.Second)
	s.Restart(t) // publishes the 30
	rep, err := auditJSON(t, "--bootstrap", s.Addr, "--topic", "br", "--lateness", "0")
	if !errors.Is(err, errUnbalanced) {
		t.Fatalf("audit: %v, want errUnbalanced (window 1's counts were lost with the killed broker)", err)
	}
	want := []struct {
		producer, broker int64
		state            string
	}{{100, 100, audit.StateBalanced}, {50, 0, audit.StateMissing}, {30, 30, audit.StateBalanced}}
	var judged []audit.Window // the windows by the broker's clock aside
	for _, w := range rep.Windows {
		if w.State != audit.StateClock {
			judged = append(judged, w)
		}
	}
	if len(judged) != len(want) {
		t.Fatalf("%d windows, want %d: %+v", len(judged), len(want), rep.Windows)
	}
	for i, w := range want {
		got := judged[i]
		if got.Tiers[audit.TierProducer].Messages != w.producer || got.Tiers[audit.TierBroker].Messages != w.broker || got.State != w.state {
			t.Errorf("window %s: producer %d, broker %d, %s; want %d, %d, %s", got.Start, got.Tiers[audit.TierProducer].Messages,
				got.Tiers[audit.TierBroker].Messages, got.State, w.producer, w.broker, w.state)
		}
		if w.state == audit.StateMissing && !strings.Contains(strings.Join(got.Reasons, ";"), "broker: 50 not counted") {
			t.Errorf("window %s: reasons %q, want the broker tier's 50 not counted", got.Start, got.Reasons)
		}
	}
	if o := judged[0].Tiers[audit.TierBroker].Origins; o != 1 {
		t.Errorf("window 0: %d broker origins, want 1 (the first process)", o)
	}
}
