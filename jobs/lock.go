package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

// ErrLocked reports a job whose lock another live run holds (or took over
// from this one). The message names the holder.
var ErrLocked = errors.New("jobs: the job is locked")

// The job lock keeps two runs of one job from loading at once (a replay
// racing a scheduled load would otherwise mix the outputs of two specs). It
// lives in the output, so it works on HDFS as on a local disk, with the
// same lease model as the writers' attempts:
//
//	_sluice/lock/
//	├── 00000000000000000007.holder                 created exclusively by the taker: JSON LockHolder
//	├── 00000000000000000007.lease-<expiry ms %020d>  its lease, a new file per renewal (old removed)
//	└── 00000000000000000007.released               created (empty) by Release: the lock is free
//
// The holder with the highest number is the lock's current one. It is free
// when released, when its newest lease expired (no lease yet: its acquired
// time counts for one lease), or when it was taken on this machine by a
// process that no longer runs (same host and boot, pid gone or another
// process's). A taker creates the next number exclusively, so of two takers
// one wins. The old number stays as a fence: a holder that finds a higher
// number, or its own lease expired, has lost the lock and commits nothing.
//
// Every commit of a task checks the fence first (Loader.fence): a run that
// holds the lock must still hold it; a task run without one (a distributed
// worker's) commits only while no live holder runs another spec of the job.
// A replay, once it holds the lock, waits for the live attempts of other
// runs to end before it withdraws anything (they see the new holder at
// their commit and abort), so no commit of an old spec lands after it.
const lockDir = "_sluice/lock"

// Lock kinds: what took the lock.
const (
	LockLoad      = "load"      // sluice load run
	LockReplay    = "replay"    // sluice replay
	LockScheduler = "scheduler" // a scheduler's run (its workers commit under it)
)

// LockHolder is what the holder file says about who holds a job's lock.
type LockHolder struct {
	Seq      int64     `json:"seq"`
	Kind     string    `json:"kind"`
	Job      string    `json:"job"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Boot     string    `json:"boot,omitempty"`      // the machine's boot id (Linux)
	PIDStart string    `json:"pid_start,omitempty"` // the process's start time in clock ticks since boot (Linux)
	Spec     string    `json:"spec"`                // SpecFingerprint of the holder's spec
	Acquired time.Time `json:"acquired"`
	// Expires is the newest lease's expiry (filled when read).
	Expires time.Time `json:"-"`
	// Released is set when the holder gave the lock back (filled when read).
	Released bool `json:"-"`
}

func (h LockHolder) String() string {
	return fmt.Sprintf("%s run of job %s by pid %d on %s since %s", h.Kind, h.Job, h.PID, h.Host, h.Acquired.UTC().Format(time.RFC3339))
}

// JobLock is a held job lock. Release it when the run ends.
type JobLock struct {
	l      *Loader
	holder LockHolder
	stop   chan struct{}
	done   chan struct{}
	// renewing is set once the renewer runs (before it starts, by the
	// goroutine that took the lock): Release waits for it to stop.
	renewing bool

	mu    sync.Mutex // guards lease and err
	lease string     // the current lease file
	err   error      // the renewer's first error: the lock is lost
}

// SpecFingerprint identifies what a spec loads and how: two runs whose
// fingerprints differ write different rows for the same records. It hashes
// the parsed spec and the bytes of its schema file.
func SpecFingerprint(s *Spec) string {
	h := sha256.New()
	b, _ := json.Marshal(s)
	h.Write(b)
	if p := s.SchemaPath(); p != "" {
		if sb, err := os.ReadFile(p); err == nil {
			h.Write(sb)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (l *Loader) lockLease() time.Duration {
	if l.opts.LockLease > 0 {
		return l.opts.LockLease
	}
	return time.Minute
}

// holderName and leaseName spell the lock's files.
func holderName(seq int64) string { return path.Join(lockDir, fmt.Sprintf("%020d.holder", seq)) }
func leaseName(seq int64, expiry time.Time) string {
	return path.Join(lockDir, fmt.Sprintf("%020d.lease-%020d", seq, expiry.UnixMilli()))
}
func releasedName(seq int64) string { return path.Join(lockDir, fmt.Sprintf("%020d.released", seq)) }

// readLock returns the lock's current holder (nil when the lock was never
// taken).
func (l *Loader) readLock() (*LockHolder, error) {
	ents, err := l.fs.List(lockDir)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: reading the job lock: %w", err)
	}
	top := int64(-1)
	for _, e := range ents {
		if seq, ok := strings.CutSuffix(e.Name, ".holder"); ok {
			if n, err := strconv.ParseInt(seq, 10, 64); err == nil && n > top {
				top = n
			}
		}
	}
	if top < 0 {
		return nil, nil
	}
	b, err := vfs.ReadFile(l.fs, holderName(top))
	if err != nil {
		return nil, fmt.Errorf("jobs: reading the job lock: %w", err)
	}
	var h LockHolder
	if err := json.Unmarshal(b, &h); err != nil {
		// A holder file is written in one exclusive step, so an unreadable
		// one was damaged by hand or by the disk: its holder and lease are
		// unknown, and no wait would make a takeover safe. Name it.
		return nil, fmt.Errorf("jobs: the job lock %s is unreadable (%v): remove it by hand once no run of the job is alive", holderName(top), err)
	}
	h.Seq = top
	h.Expires = h.Acquired.Add(l.lockLease()) // a newborn holder: its acquired time counts for one lease
	prefix := fmt.Sprintf("%020d.", top)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name, prefix)
		if !ok {
			continue
		}
		if rest == "released" {
			h.Released = true
		}
		if ms, ok := strings.CutPrefix(rest, "lease-"); ok {
			if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
				h.Expires = time.UnixMilli(n)
			}
		}
	}
	return &h, nil
}

// live reports whether h still holds the lock at now.
func (l *Loader) live(h *LockHolder, now time.Time) bool {
	if h == nil || h.Released || !now.Before(h.Expires) {
		return false
	}
	if host, _ := os.Hostname(); h.Host == host && h.Boot != "" && h.Boot == bootID() {
		if h.PID == os.Getpid() && h.PIDStart == pidStart(h.PID) {
			return true
		}
		// The same machine since the same boot: a pid that is gone, or now
		// another process, died without releasing.
		return h.PIDStart != "" && pidStart(h.PID) == h.PIDStart
	}
	return true
}

// AcquireLock takes the job's lock for a run of the given kind, or fails
// with ErrLocked naming the live holder. A scheduler's run may take over a
// live lock of another scheduler's run of the same spec (the elected
// scheduler adopts the runs of the one before). The lock is renewed in the
// background until Release.
func (l *Loader) AcquireLock(kind string) (*JobLock, error) {
	now := l.opts.Clock.Now()
	cur, err := l.readLock()
	if err != nil {
		return nil, err
	}
	fp := l.fingerprint
	if l.live(cur, now) && !(kind == LockScheduler && cur.Kind == LockScheduler && cur.Spec == fp) {
		return nil, l.lockedError(cur)
	}
	seq := int64(0)
	if cur != nil {
		seq = cur.Seq + 1
	}
	host, _ := os.Hostname()
	h := LockHolder{Seq: seq, Kind: kind, Job: l.spec.Name, Host: host, PID: os.Getpid(), Boot: bootID(),
		PIDStart: pidStart(os.Getpid()), Spec: fp, Acquired: now.UTC()}
	b, _ := json.MarshalIndent(h, "", "  ")
	if err := l.fs.MkdirAll(lockDir); err != nil {
		return nil, fmt.Errorf("jobs: taking the job lock: %w", err)
	}
	if err := l.fs.WriteExclusive(holderName(seq), append(b, '\n')); err != nil {
		if errors.Is(err, vfs.ErrExist) {
			if other, rerr := l.readLock(); rerr == nil && other != nil {
				return nil, l.lockedError(other)
			}
			return nil, fmt.Errorf("%w: another run took it at the same moment", ErrLocked)
		}
		return nil, fmt.Errorf("jobs: taking the job lock: %w", err)
	}
	if cur != nil && !cur.Released {
		l.log.Warn("took over the job lock of a run that is gone", "was", cur.String(), "lease_expired", cur.Expires)
	}
	lk := &JobLock{l: l, holder: h, stop: make(chan struct{}), done: make(chan struct{})}
	if err := lk.renew(now); err != nil {
		lk.Release()
		return nil, err
	}
	lk.renewing = true
	go lk.renewLoop()
	return lk, nil
}

func (l *Loader) lockedError(h *LockHolder) error {
	return fmt.Errorf("%w: %s holds it (lease until %s); wait for it to end, or for its lease to expire if it died",
		ErrLocked, h, h.Expires.UTC().Format(time.RFC3339))
}

// Holder returns who holds the lock (this run).
func (lk *JobLock) Holder() LockHolder { return lk.holder }

// renew extends the lease to one lease past at: the time the renewal was
// due (a renewal timer's firing time). On the real clock that is now; on a
// manual clock moved past several renewals at once, it is the first one
// missed, so a holder that was "stalled" across its lease does not revive
// it afterwards.
func (lk *JobLock) renew(at time.Time) error {
	l := lk.l
	expiry := at.Add(l.lockLease())
	name := leaseName(lk.holder.Seq, expiry)
	lk.mu.Lock()
	prev := lk.lease
	lk.mu.Unlock()
	if name == prev {
		return nil
	}
	if err := l.fs.WriteExclusive(name, []byte(expiry.UTC().Format(time.RFC3339Nano)+"\n")); err != nil && !errors.Is(err, vfs.ErrExist) {
		return fmt.Errorf("jobs: renewing the job lock: %w", err)
	}
	if prev != "" {
		l.fs.Remove(prev) // best effort: the newest lease is the one that counts
	}
	lk.mu.Lock()
	lk.lease = name
	lk.mu.Unlock()
	return nil
}

func (lk *JobLock) renewLoop() {
	defer close(lk.done)
	every := max(lk.l.lockLease()/3, time.Millisecond)
	t := lk.l.opts.Clock.NewTimer(every) // the loader's clock, which judges the lease
	defer t.Stop()
	for {
		select {
		case <-lk.stop:
			return
		case at := <-t.C():
			if err := lk.renew(at); err != nil {
				lk.l.log.Warn("renewing the job lock", "err", err)
			}
			t.Reset(every)
		}
	}
}

// Release stops renewing and gives the lock back.
func (lk *JobLock) Release() error {
	select {
	case <-lk.stop:
		return nil
	default:
	}
	close(lk.stop)
	if lk.renewing {
		<-lk.done
	}
	l := lk.l
	// The marker is empty: readLock needs only its name, and a full file
	// system that refuses bytes still takes an empty file (an inode, a
	// directory entry). A marker with content failed there, and a run
	// failed by a full warehouse left the lock held until its lease ran
	// out, refusing every run after the space came back for that long (the
	// chaos disk-full scenario).
	err := l.fs.WriteExclusive(releasedName(lk.holder.Seq), nil)
	if errors.Is(err, vfs.ErrExist) {
		err = nil
	}
	lk.mu.Lock()
	if lk.lease != "" {
		l.fs.Remove(lk.lease)
	}
	lk.mu.Unlock()
	if err != nil {
		return fmt.Errorf("jobs: releasing the job lock: %w", err)
	}
	return nil
}

// fence is checked before every commit of a task: a run holding the lock
// must still hold it; a task run without it commits only while no live
// holder runs another spec of the job.
func (l *Loader) fence() error {
	cur, err := l.readLock()
	if err != nil {
		return err
	}
	now := l.opts.Clock.Now()
	if lk := l.heldLock(); lk != nil {
		if cur == nil || cur.Seq != lk.holder.Seq || cur.Released || !now.Before(cur.Expires) {
			if cur != nil && cur.Seq != lk.holder.Seq {
				return fmt.Errorf("%w: this run lost the job lock: %s took it over; nothing more is committed", ErrLocked, cur)
			}
			return fmt.Errorf("%w: this run's lease on the job lock expired; nothing more is committed", ErrLocked)
		}
		return nil
	}
	if l.live(cur, now) && cur.Spec != l.fingerprint {
		return fmt.Errorf("%w: %s with another spec of the job; this task commits nothing", ErrLocked, cur)
	}
	return nil
}

func (l *Loader) heldLock() *JobLock {
	l.lockMu.Lock()
	defer l.lockMu.Unlock()
	return l.lock
}

// withLock runs f holding the job's lock (of kind), unless this loader
// holds it already.
func (l *Loader) withLock(kind string, f func() error) error {
	if l.heldLock() != nil {
		return f()
	}
	lk, err := l.AcquireLock(kind)
	if err != nil {
		return err
	}
	l.lockMu.Lock()
	l.lock = lk
	l.lockMu.Unlock()
	defer func() {
		l.lockMu.Lock()
		l.lock = nil
		l.lockMu.Unlock()
		if err := lk.Release(); err != nil {
			l.log.Warn("releasing the job lock", "err", err)
		}
	}()
	return f()
}

// HoldLock makes the loader's runs and tasks use lk (a lock a caller took
// with AcquireLock, e.g. a scheduler for the whole of a run); nil forgets it.
func (l *Loader) HoldLock(lk *JobLock) {
	l.lockMu.Lock()
	l.lock = lk
	l.lockMu.Unlock()
}

// waitForOtherAttempts waits until no live attempt of another run is left
// on the given partitions (they see this run's lock at their commit and
// abort), for at most wait. Recovery removes the dead ones.
func (l *Loader) waitForOtherAttempts(ctx context.Context, parts []Position, wait time.Duration) error {
	deadline := l.opts.Clock.Now().Add(wait)
	for {
		var pending []string
		for _, p := range parts {
			rep, err := l.store.Recover(p.Topic, p.Partition)
			if err != nil {
				return fmt.Errorf("jobs: recovering %s/%d: %w", p.Topic, p.Partition, err)
			}
			pending = append(pending, rep.Pending...)
		}
		if len(pending) == 0 {
			return nil
		}
		if !l.opts.Clock.Now().Before(deadline) {
			return fmt.Errorf("%w: %d attempts of another run are still live (%s); they commit nothing under this lock: run again once they end",
				ErrLocked, len(pending), strings.Join(pending[:min(len(pending), 3)], ", "))
		}
		if err := l.pauseOnClock(ctx, min(200*time.Millisecond, deadline.Sub(l.opts.Clock.Now()))); err != nil {
			return err
		}
	}
}

// pauseOnClock waits d of the loader's clock, or until ctx ends.
func (l *Loader) pauseOnClock(ctx context.Context, d time.Duration) error {
	t := l.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// otherAttemptsWait bounds how long a replay waits for the attempts of
// another run to end.
func (l *Loader) otherAttemptsWait() time.Duration { return 2 * l.lockLease() }

// bootID is the machine's boot id (Linux), "" elsewhere.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// pidStart is a process's start time in clock ticks since boot (field 22 of
// /proc/PID/stat), "" when no such process runs.
func pidStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19] // fields 3.. follow ')': field 22 is index 19
}
