package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
)

// stamps samples how many operations a Recorder has completed, every
// 100 ms, so an operation's id maps back to the wall-clock time the
// process logs are stamped with (the history itself keeps only ticks).
type stamps struct {
	rec  *history.Recorder
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex // guards samples
	samples []sample
}

type sample struct {
	at    time.Time
	count int // operations completed by at
}

func newStamps(rec *history.Recorder) *stamps {
	s := &stamps{rec: rec, stop: make(chan struct{}), done: make(chan struct{})}
	s.take()
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.take()
			case <-s.stop:
				s.take()
				return
			}
		}
	}()
	return s
}

func (s *stamps) take() {
	n := len(s.rec.History())
	s.mu.Lock()
	s.samples = append(s.samples, sample{time.Now(), n})
	s.mu.Unlock()
}

func (s *stamps) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// span returns wall-clock bounds within which the ops ids completed.
func (s *stamps) span(ids []int) (from, to time.Time) {
	if len(ids) == 0 {
		return
	}
	lo, hi := ids[0], ids[0]
	for _, id := range ids {
		lo, hi = min(lo, id), max(hi, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// op id i completed after the last sample with count <= i and by the
	// first sample with count > i
	for _, sm := range s.samples {
		if sm.count <= lo {
			from = sm.at
		}
		if sm.count > hi && to.IsZero() {
			to = sm.at
		}
	}
	if to.IsZero() && len(s.samples) > 0 {
		to = s.samples[len(s.samples)-1].at
	}
	return from, to
}

// verdict checks h, adds the counts, the anomalies and the first anomaly's
// window to rep, and hands it to the run to write and judge.
func verdict(t *testing.T, r *harness.Run, sched *harness.Schedule, h history.History, st *stamps, rep harness.Report) history.Result {
	res := history.Check(h)
	return report(t, r, sched, h, res, st, rep)
}

// report is verdict for a result already computed (a scenario that allows
// some anomalies filters them first).
//
// A run proves nothing when its workload had nothing acknowledged for the
// checker to look for, or when its schedule injected no fault: report fails
// the test then (minOK ok operations, and a fault for every run with a
// schedule), whatever the checker says.
func report(t *testing.T, r *harness.Run, sched *harness.Schedule, h history.History, res history.Result, st *stamps, rep harness.Report) history.Result {
	t.Helper()
	defer requireWork(t, sched, h)
	if rep.Operations == nil {
		rep.Operations = map[string]int{}
	}
	for _, op := range h {
		rep.Operations[fmt.Sprintf("%s %s", op.Kind, op.Outcome)]++
	}
	for _, a := range res.Anomalies {
		rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("%s: %s (ops %v)", a.Kind, a.Detail, a.Ops))
	}
	if len(res.Anomalies) > 0 {
		first := res.Anomalies[0]
		for _, op := range history.Window(h, first.Ops, 2) {
			rep.Window = append(rep.Window, op.String())
		}
		if st != nil {
			rep.WindowFrom, rep.WindowTo = st.span(first.Ops)
		}
	}
	if sched != nil {
		if err := sched.Err(); err != nil {
			rep.Notes = append(rep.Notes, "nemesis errors: "+err.Error())
		}
	}
	sort.Strings(rep.Notes)
	r.Finish(rep, sched)
	return res
}

// minOK is the fewest ok operations a scenario's history must hold for its
// check to mean anything.
const minOK = 20

func requireWork(t *testing.T, sched *harness.Schedule, h history.History) {
	t.Helper()
	ok := 0
	for _, op := range h {
		if op.Outcome == history.OK {
			ok++
		}
	}
	if ok < minOK {
		t.Errorf("the history holds %d ok operations, fewer than %d: the checker had too little to find anything in", ok, minOK)
	}
	if sched == nil {
		return
	}
	faults := 0
	for _, e := range sched.Events.List() {
		if e.What == "fault" {
			faults++
		}
	}
	if faults == 0 {
		t.Errorf("the schedule injected no fault (%d planned): the run checked a quiet system", len(sched.Steps))
	}
}

// newHistory makes the run's recorder writing history.jsonl in the report
// directory; the returned func flushes and closes the file. Its ticks are
// the counter file at ticksPath(r), which workload processes the run starts
// open too (history.OpenTicks), so their operations are taken into this
// history with the ticks they had (history.Recorder.Take).
func newHistory(t *testing.T, r *harness.Run) (*history.Recorder, func()) {
	t.Helper()
	ticks, err := history.OpenTicks(ticksPath(r))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(historyPath(r))
	if err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorderTicks(f, ticks)
	var once sync.Once
	done := func() {
		once.Do(func() {
			if err := rec.Flush(); err != nil {
				t.Error(err)
			}
			f.Close()
		})
	}
	t.Cleanup(done)
	// ticks stays mapped for the test binary's life (one page a run): a
	// client goroutine a failed test left behind may still take a tick
	return rec, done
}

func historyPath(r *harness.Run) string { return filepath.Join(r.Dir, "history.jsonl") }

// ticksPath is the run's tick counter file (history.OpenTicks).
func ticksPath(r *harness.Run) string { return filepath.Join(r.Work, "history.ticks") }
