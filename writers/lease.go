package writers

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/mutate"
	"github.com/sluicehq/sluice/internal/vfs"
)

// ErrAttemptExpired reports an attempt whose lease expired and which
// recovery took over: its temporaries are deleted (or being deleted) and it
// can no longer commit. Nothing of it was committed; run the split again.
var ErrAttemptExpired = errors.New("writers: the attempt's lease expired and recovery removed it")

// Control files in an attempt directory. Data files always hold a '+' (or
// sit in partition directories), these never do.
const (
	leasePrefix = "_lease-" // _lease-<expiry, Unix milliseconds %020d>
	fateName    = "_fate"   // created once: the commit intent or the reaped mark
	reapedMagic = "sluice-reaped"
)

// Renew extends the attempt's lease to StoreOptions.Lease from now, by
// creating a new lease file and removing the previous one. SplitWriter.Write
// renews when a third of the lease has passed; a caller that may wait longer
// than that between writes (a slow reader) calls Renew itself. An error
// wrapping ErrAttemptExpired means recovery already took the attempt.
func (a *Attempt) Renew() error {
	s := a.store
	now := s.opts.Clock.Now()
	expiry := now.Add(s.opts.Lease)
	name := path.Join(a.dir, fmt.Sprintf("%s%020d", leasePrefix, expiry.UnixMilli()))
	if name == a.lease {
		return nil
	}
	// The name says it all; the body is for people.
	err := s.fs.WriteExclusive(name, []byte(expiry.UTC().Format(time.RFC3339Nano)+"\n"))
	switch {
	case errors.Is(err, vfs.ErrNotExist):
		return fmt.Errorf("%w: %s: %v", ErrAttemptExpired, a.dir, err)
	case err != nil && !errors.Is(err, vfs.ErrExist):
		return fmt.Errorf("writers: renewing the lease of %s: %w", a.dir, err)
	}
	if a.lease != "" {
		if err := s.fs.Remove(a.lease); err != nil {
			return fmt.Errorf("writers: renewing the lease of %s: %w", a.dir, err)
		}
	}
	a.lease = name
	a.renewAt = now.Add(s.opts.Lease / 3)
	if s.opts.Lease < 0 {
		a.renewAt = now.Add(1 << 62) // every lease counts as expired: never renew
	}
	return nil
}

// renewIfDue renews the lease once a third of it has passed.
func (a *Attempt) renewIfDue() error {
	if a.store.opts.Clock.Now().Before(a.renewAt) {
		return nil
	}
	return a.Renew()
}

// claim creates the attempt's fate file with its commit intent (the
// manifest's bytes). From then on recovery never removes the attempt: it
// completes the commit from the intent instead. A fate already there is
// either our intent (fine) or recovery's reaped mark (ErrAttemptExpired).
func (a *Attempt) claim(intent []byte) error {
	s := a.store
	p := path.Join(a.dir, fateName)
	write := s.fs.WriteExclusive
	if mutate.Enabled(mutate.Fate) { // test-only: the intent replaces a reaped mark
		write = func(p string, b []byte) error { return vfs.WriteFileAtomic(s.fs, path.Dir(p), path.Base(p), b) }
	}
	err := write(p, intent)
	switch {
	case err == nil:
		a.intent = true
		return nil
	case errors.Is(err, vfs.ErrNotExist):
		return fmt.Errorf("%w: %s is gone", ErrAttemptExpired, a.dir)
	case !errors.Is(err, vfs.ErrExist):
		a.intent = true // it may be there, whole: Recover will tell
		return fmt.Errorf("%w: %s, writing the intent: %w", ErrCommitUnknown, a.split, err)
	}
	m, reaped, rerr := s.readFate(p)
	switch {
	case rerr == nil && reaped:
		return fmt.Errorf("%w: %s", ErrAttemptExpired, a.dir)
	case rerr == nil && m.Attempt == a.id:
		a.intent = true
		return nil
	default:
		a.intent = true
		return fmt.Errorf("%w: %s: writing the intent: %w; reading it back: %w", ErrCommitUnknown, a.split, err, rerr)
	}
}

// readFate reads an attempt's fate file: a commit intent (a manifest) or
// the reaped mark.
func (s *Store) readFate(p string) (intent *Manifest, reaped bool, err error) {
	b, err := await(s, func() ([]byte, error) {
		b, err := vfs.ReadFile(s.fs, p)
		if err == nil && strings.HasPrefix(string(b), reapedMagic+" ") {
			_, err = open(reapedMagic, b)
		} else if err == nil {
			_, err = DecodeManifest(b)
		}
		return b, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", p, err)
	}
	if strings.HasPrefix(string(b), reapedMagic+" ") {
		return nil, true, nil
	}
	m, err := DecodeManifest(b)
	return m, false, err
}

// reap takes an attempt whose lease expired: it creates the attempt's fate
// file with the reaped mark, so the attempt can never commit, and reports
// whether it did. false with a nil error: the attempt claimed its fate first
// (read the fate and follow it) or its directory is gone.
func (s *Store) reap(dir string, now time.Time) (bool, error) {
	body, _ := json.Marshal(map[string]any{"reaped": now.UTC()})
	err := s.fs.WriteExclusive(path.Join(dir, fateName), seal(reapedMagic, append(body, '\n')))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, vfs.ErrExist), errors.Is(err, vfs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// leaseExpired reports whether the attempt in dir holds no live lease: its
// newest lease file names an expiry at or before now (or it has none: it
// died before taking one). File modification times are never used.
func (s *Store) leaseExpired(dir string, now time.Time) (bool, error) {
	if s.opts.Lease < 0 || mutate.Enabled(mutate.Lease) { // test-only switch: every lease counts as expired
		return true, nil
	}
	ents, err := s.fs.List(dir)
	if errors.Is(err, vfs.ErrNotExist) {
		return false, nil // gone: nothing to do
	}
	if err != nil {
		return false, err
	}
	var expiry int64 = -1
	for _, e := range ents {
		if ms, ok := strings.CutPrefix(e.Name, leasePrefix); ok {
			if n, err := strconv.ParseInt(ms, 10, 64); err == nil && n > expiry {
				expiry = n
			}
		}
	}
	if expiry < 0 {
		// No lease yet: the attempt may be newborn (NewAttempt makes the
		// directory, then writes the first lease). Its ID carries its birth
		// time, so it counts as leased from then for one lease period; an
		// attempt that died before its first lease is reaped after that.
		born, ok := attemptBirth(path.Base(dir))
		if !ok {
			return true, nil
		}
		expiry = born.Add(s.opts.Lease).UnixMilli()
	}
	return now.UnixMilli() >= expiry, nil
}

// attemptBirth reads the creation time an attempt ID starts with
// ("20060102T150405Z-<random hex>", see NewAttempt), rounded up to the
// next second so that a birth within a second never looks older than it is.
func attemptBirth(id string) (time.Time, bool) {
	stamp, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(attemptTimeLayout, stamp)
	if err != nil {
		return time.Time{}, false
	}
	return t.Add(time.Second), true
}
