package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// A run of a job holds the job's lock: a replay or another load of the job
// is refused meanwhile with the holder named, a task of another spec
// commits nothing, and a lock left by a killed process or an expired lease
// is taken over, after which the old holder commits nothing.
func TestJobLockKeepsRunsOfOneJobApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "locked", 600, 1, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "locked", 1, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "locked", b.Addr, "locked", 100, "schema_file: pageview.avsc", out))
	clock := clock.NewManual(time.Now())
	open := func(t *testing.T, s *jobs.Spec) *jobs.Loader {
		l, err := jobs.Open(ctx, s, jobs.Options{Clock: clock, LockLease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	holder := open(t, spec)

	t.Run("refused-while-held", func(t *testing.T) {
		lk, err := holder.AcquireLock(jobs.LockLoad)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release()
		other := open(t, spec)
		if _, err := other.Run(ctx); !errors.Is(err, jobs.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
			t.Fatalf("a second load while the lock is held: %v", err)
		}
		if _, err := other.Replay(ctx, "locked/0@0"); !errors.Is(err, jobs.ErrLocked) || !strings.Contains(err.Error(), "load run of job locked") {
			t.Fatalf("a replay while a load holds the lock: %v", err)
		}
		// A task of another spec of the job commits nothing while the lock
		// is held by this one's run.
		changed := *spec
		changed.Map.Where = "status >= 400"
		plan, err := open(t, &changed).Preview(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := open(t, &changed).RunTask(ctx, plan.Splits[0]); !errors.Is(err, jobs.ErrLocked) {
			t.Fatalf("a task of another spec under a held lock: %v", err)
		}
		if cps, _ := holder.Checkpoints(ctx); len(cps) != 1 || cps[0].Commits != 0 {
			t.Fatalf("something was committed: %+v", cps)
		}
	})

	t.Run("released", func(t *testing.T) {
		rep, err := open(t, spec).Run(ctx)
		if err != nil || rep.Totals.RowsOut != 600 {
			t.Fatalf("a run after the release: %+v %v", rep.Totals, err)
		}
	})

	t.Run("killed-holder", func(t *testing.T) {
		// A process that took the lock and was killed: its pid is gone, so
		// the lock is free at once, though its lease runs for an hour.
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		dead := cmd.Process.Pid
		start := pidStartOf(t, dead)
		cmd.Process.Kill()
		cmd.Wait()
		writeHolder(t, out, 1000, jobs.LockHolder{Kind: jobs.LockLoad, Job: "locked", Host: hostname(t), PID: dead, Boot: bootID(t),
			PIDStart: start, Spec: jobs.SpecFingerprint(spec), Acquired: clock.Now()})
		lk, err := open(t, spec).AcquireLock(jobs.LockReplay)
		if err != nil {
			t.Fatalf("the lock of a killed process was not taken over: %v", err)
		}
		lk.Release()
	})

	t.Run("other-host-until-its-lease-expires", func(t *testing.T) {
		writeHolder(t, out, 2000, jobs.LockHolder{Kind: jobs.LockLoad, Job: "locked", Host: "elsewhere.example", PID: 1,
			Spec: jobs.SpecFingerprint(spec), Acquired: clock.Now()})
		l := open(t, spec)
		if _, err := l.AcquireLock(jobs.LockLoad); !errors.Is(err, jobs.ErrLocked) || !strings.Contains(err.Error(), "elsewhere.example") {
			t.Fatalf("a live lock of another machine: %v", err)
		}
		clock.Advance(time.Hour + time.Second)
		lk, err := l.AcquireLock(jobs.LockLoad)
		if err != nil {
			t.Fatalf("an expired lock was not taken over: %v", err)
		}
		lk.Release()
	})

	t.Run("old-holder-is-fenced", func(t *testing.T) {
		more, _ := pageViews(t, "locked", 100, 1, time.Hour, -1)
		produceAll(t, ctx, b.Addr, "locked", 0, more)
		old := open(t, spec)
		lk, err := old.AcquireLock(jobs.LockLoad)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release()
		old.HoldLock(lk)
		plan, err := old.Preview(ctx)
		if err != nil || len(plan.Splits) != 1 {
			t.Fatalf("%+v %v", plan, err)
		}
		clock.Advance(2 * time.Hour) // the old holder stalls past its lease; a replay takes over
		taker, err := open(t, spec).AcquireLock(jobs.LockReplay)
		if err != nil {
			t.Fatal(err)
		}
		defer taker.Release()
		if _, err := old.RunTask(ctx, plan.Splits[0]); !errors.Is(err, jobs.ErrLocked) || !strings.Contains(err.Error(), "lost the job lock") {
			t.Fatalf("the stalled holder's task: %v", err)
		}
		if cps, _ := old.Checkpoints(ctx); cps[0].Offset != 600 {
			t.Fatalf("the fenced task committed: %+v", cps)
		}
	})
}

func writeHolder(t *testing.T, out string, seq int64, h jobs.LockHolder) {
	t.Helper()
	fs, err := filesystem.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if err := fs.MkdirAll("_sluice/lock"); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(h)
	if err := fs.WriteExclusive(fmt.Sprintf("_sluice/lock/%020d.holder", seq), b); err != nil {
		t.Fatal(err)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func bootID(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatalf("this test needs Linux's /proc: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func pidStartOf(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[19]
}

// A run counts only what it committed: while a worker (RunTask without the
// lock, as a distributed worker runs) takes splits of the same plan, the
// run's totals are exactly the records of the manifests its own attempts
// made, and the splits the worker took are counted as taken by others.
func TestRunCountsOnlyWhatItCommitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "counted", 4000, 2, time.Hour, -1)
	counts := produceAll(t, ctx, b.Addr, "counted", 2, recs)
	for round := 0; round < 5; round++ {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "counted", b.Addr, "counted", 100, "schema_file: pageview.avsc", out))
		worker, err := jobs.Open(ctx, spec, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := worker.Plan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var workerRows int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for pass := 0; pass < 50; pass++ {
				for _, s := range plan.Splits {
					if tr, err := worker.RunTask(ctx, s); err == nil && tr.Won {
						workerRows += tr.RowsOut
					}
				}
			}
		}()
		rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 2})
		<-done
		worker.Close()
		if err != nil && !errors.Is(err, jobs.ErrNotReady) {
			t.Fatal(err)
		}
		mine := map[string]bool{}
		taken := 0
		for _, tr := range rep.Tasks {
			if tr.Won {
				mine[tr.Attempt] = true
			}
			if tr.AlreadyCommitted && !tr.Won {
				taken++
			}
		}
		var committedByRun, all int64
		for _, m := range manifestsOf(t, out, "counted", counts) {
			all += m.Records
			if mine[m.Attempt] {
				committedByRun += m.Records
			}
		}
		if rep.Totals.RowsOut != committedByRun || rep.Totals.TakenByOthers != taken {
			t.Fatalf("round %d: the run reports %d rows and %d splits taken by others; it committed %d rows, %d of its tasks found their split taken",
				round, rep.Totals.RowsOut, rep.Totals.TakenByOthers, committedByRun, taken)
		}
		if committedByRun+workerRows != all {
			t.Fatalf("round %d: run %d + worker %d rows != %d committed", round, committedByRun, workerRows, all)
		}
		if taken > 0 {
			return // the race happened and was counted right
		}
	}
	t.Fatal("in five rounds the worker never took a split of the run's plan: the test did not test")
}

func manifestsOf(t *testing.T, out, topic string, counts map[int32]int64) []*writers.Manifest {
	t.Helper()
	fs, err := filesystem.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	st := writers.NewStore(fs, writers.StoreOptions{})
	var ms []*writers.Manifest
	for p := range counts {
		got, err := st.Commits(topic, p)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, got...)
	}
	return ms
}

// The job lock's timers run on the loader's clock, which judges its lease:
// on a clock.Manual the lease is renewed when the clock passes a third of
// it (so a run holding the lock keeps it past its first lease), and a
// replay waiting for a live attempt of another run gives up once the clock
// passes its wait (two leases), without any wall-clock time passing.
func TestJobLockTimersRunOnTheLoaderClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "clocked", 100, 1, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "clocked", 1, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "clocked", b.Addr, "clocked", 100, "schema_file: pageview.avsc", out))
	clk := clock.NewManual(time.Now())
	const lease = time.Minute
	open := func() *jobs.Loader {
		l, err := jobs.Open(ctx, spec, jobs.Options{Clock: clk, LockLease: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	if rep, err := open().Run(ctx); err != nil || rep.Totals.RowsOut != 100 {
		t.Fatalf("the first run: %+v %v", rep, err)
	}
	waiting := func(t *testing.T, what string) {
		t.Helper()
		for clk.Waiters() == 0 {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond) // polling
		}
	}

	t.Run("renewed-on-the-clock", func(t *testing.T) {
		lk, err := open().AcquireLock(jobs.LockLoad)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release()
		waiting(t, "the renewal timer")
		clk.Advance(lease / 2) // the renewal falls due at lease/3
		waiting(t, "the renewal to re-arm its timer")
		clk.Advance(lease/2 + time.Second) // past the first lease
		if _, err := open().AcquireLock(jobs.LockReplay); !errors.Is(err, jobs.ErrLocked) {
			t.Fatalf("the lock was not renewed on the loader's clock: %v", err)
		}
	})

	t.Run("replay-wait-ends-on-the-clock", func(t *testing.T) {
		// A live attempt of another run on the partition (its lease is the
		// store's 10 minutes, on the same clock).
		fs, err := filesystem.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		if _, err := writers.NewStore(fs, writers.StoreOptions{Clock: clk}).NewAttempt(writers.Split{Topic: "clocked", Partition: 0, Start: 100, End: 200}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := open().Replay(ctx, "clocked/0@0"); done <- err }()
		// Time passes in steps shorter than a renewal period, each once the
		// replay's pause and its lock's renewal wait on the clock again, so
		// the replay's own lock stays renewed while it waits.
		for step := 0; ; step++ {
			for clk.Waiters() < 2 {
				select {
				case err := <-done:
					if !errors.Is(err, jobs.ErrLocked) || !strings.Contains(err.Error(), "still live") {
						t.Fatalf("a replay waiting for a live attempt past its wait on the loader's clock: %v", err)
					}
					if step < 8 { // 2 leases in steps of a quarter lease
						t.Fatalf("the replay gave up after %d steps of %v, before its wait of %v", step, lease/4, 2*lease)
					}
					return
				case <-ctx.Done():
					t.Fatal("timed out waiting for the replay")
				case <-time.After(5 * time.Millisecond): // polling
				}
			}
			clk.Advance(lease / 4)
		}
	})
}

// fullFS refuses every write of bytes with ENOSPC while full, as a full
// file system does, and still creates empty files (an inode and a name).
type fullFS struct {
	vfs.FS
	full atomic.Bool
}

func (f *fullFS) WriteExclusive(name string, data []byte) error {
	if f.full.Load() && len(data) > 0 {
		return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return f.FS.WriteExclusive(name, data)
}

// A run that ends while the warehouse is full still gives the lock back:
// the next run, once space returns, is not refused for a lease. (Found by
// the chaos disk-full scenario: every load after the heal was refused by
// the lock of a run that had failed while the disk was full.)
func TestJobLockReleasedOnAFullFileSystem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	dir := t.TempDir()
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "fulllock", b.Addr, "fulllock", 100, "schema_file: pageview.avsc", filepath.Join(dir, "out")))
	fs := &fullFS{FS: vfs.NewMem()}
	open := func() *jobs.Loader {
		l, err := jobs.Open(ctx, spec, jobs.Options{FS: fs, LockLease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	lk, err := open().AcquireLock(jobs.LockLoad)
	if err != nil {
		t.Fatal(err)
	}
	fs.full.Store(true)
	if err := lk.Release(); err != nil {
		t.Fatalf("releasing the lock on a full file system: %v", err)
	}
	fs.full.Store(false)
	next, err := open().AcquireLock(jobs.LockLoad)
	if err != nil {
		t.Fatalf("the lock after the space came back: %v", err)
	}
	next.Release()
}
