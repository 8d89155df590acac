package writers

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

// RecoveryReport says what Recover did.
type RecoveryReport struct {
	RolledForward []int64  // starts of commits whose moves were finished
	Discarded     []string // attempt directories deleted (losers, uncommitted)
	Pending       []string // attempt directories left alone (maybe alive)
	TornMovedAway []int64  // starts of torn manifests moved to _sluice/torn
}

// Recover brings one partition's output to a clean state after crashes. It
// reads the manifests of the splits that have attempt directories under
// _sluice/tmp/<topic>/<partition>/ (never a listing of the warehouse), and
// for each attempt:
//
//   - the manifest names this attempt: finish its moves (roll forward);
//   - the manifest names another attempt: this one lost; delete it;
//   - no manifest, but the attempt's commit intent: complete the commit
//     (create the manifest from the intent), then as above;
//   - no manifest, no intent, lease expired: mark the attempt reaped (so it
//     can never commit), then delete it; a live lease (or, before the first
//     lease, less than a lease period since the birth in its ID): leave it alone;
//   - a torn manifest older than TornGrace: its writer died mid-commit, so
//     nothing of it was moved; move it to _sluice/torn and go on as without.
//
// It also removes temporaries a crash left in the commits directory. A
// manifest of a newer version stops it with ErrManifestVersion, touching
// nothing. Recover is idempotent and safe to run while attempts are writing
// and committing.
func (s *Store) Recover(topic string, partition int32) (RecoveryReport, error) {
	var rep RecoveryReport
	if err := s.removeStaleTemps(topic, partition); err != nil {
		return rep, err
	}
	base := partDir(tmpDir, topic, partition)
	starts, err := s.fs.List(base)
	if errors.Is(err, vfs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("writers: recover %s/%d: %w", topic, partition, err)
	}
	now := s.opts.Clock.Now()
	for _, st := range starts {
		start, ok := parseStart(st.Name)
		if !st.IsDir || !ok {
			continue
		}
		mp := ManifestPath(topic, partition, start)
		m, merr := s.readManifest(mp)
		if errors.Is(merr, ErrTornManifest) {
			if m, merr = s.setTornAside(mp, now, start, &rep); merr == errPending {
				rep.Pending = append(rep.Pending, path.Join(base, st.Name))
				continue
			}
		}
		if merr != nil && !errors.Is(merr, vfs.ErrNotExist) {
			return rep, fmt.Errorf("writers: recover %s/%d: %w", topic, partition, merr)
		}
		attempts, err := s.fs.List(path.Join(base, st.Name))
		if err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return rep, err
		}
		for _, at := range attempts {
			if err := s.recoverAttempt(m, mp, path.Join(base, st.Name, at.Name), at.Name, now, &rep); err != nil {
				return rep, err
			}
		}
		// The start directory is empty now unless something is pending.
		if left, err := s.fs.List(path.Join(base, st.Name)); err == nil && len(left) == 0 {
			if err := s.fs.Remove(path.Join(base, st.Name)); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

var errPending = errors.New("pending")

// setTornAside moves a torn manifest to _sluice/torn once TornGrace passed
// (errPending before), re-reading it first in case its writer finished.
func (s *Store) setTornAside(mp string, now time.Time, start int64, rep *RecoveryReport) (*Manifest, error) {
	info, err := s.fs.Stat(mp)
	if err != nil {
		return nil, err
	}
	if s.opts.TornGrace > 0 && now.Sub(info.ModTime) < s.opts.TornGrace {
		return nil, errPending
	}
	m, err := s.readManifest(mp)
	if !errors.Is(err, ErrTornManifest) {
		return m, err
	}
	dir, _ := path.Split(mp)
	topicDir, part := path.Split(path.Clean(dir))
	aside := path.Join(tornDir, path.Base(topicDir), part, fmt.Sprintf("%020d.json.%d", start, now.UnixNano()))
	if err := s.fs.MkdirAll(path.Dir(aside)); err != nil {
		return nil, err
	}
	if err := s.fs.RenameNoReplace(mp, aside); err != nil {
		return nil, fmt.Errorf("writers: moving torn manifest %s aside: %w", mp, err)
	}
	s.log.Warn("torn manifest moved aside", "manifest", mp, "to", aside)
	rep.TornMovedAway = append(rep.TornMovedAway, start)
	return nil, vfs.ErrNotExist
}

// recoverAttempt settles one attempt directory given its split's manifest
// (nil: none).
func (s *Store) recoverAttempt(m *Manifest, mp, dir, id string, now time.Time, rep *RecoveryReport) error {
	if m == nil {
		intent, reaped, err := s.readFate(path.Join(dir, fateName))
		switch {
		case err == nil && !reaped:
			// The attempt decided to commit: finish what it started.
			if m, err = s.completeIntent(mp, intent); err != nil {
				return err
			}
		case err == nil && reaped:
			// A previous recovery took it and stopped before deleting.
		case errors.Is(err, ErrTornManifest):
			// A dead HDFS writer's partial fate file: the attempt never
			// created its manifest. Wait TornGrace for a slow writer.
			info, serr := s.fs.Stat(path.Join(dir, fateName))
			if serr == nil && s.opts.TornGrace > 0 && now.Sub(info.ModTime) < s.opts.TornGrace {
				rep.Pending = append(rep.Pending, dir)
				return nil
			}
		case errors.Is(err, vfs.ErrNotExist):
			expired, err := s.leaseExpired(dir, now)
			if err != nil {
				return err
			}
			if !expired {
				rep.Pending = append(rep.Pending, dir)
				return nil
			}
			if testHookBeforeReap != nil {
				testHookBeforeReap(dir)
			}
			took, err := s.reap(dir, now)
			if err != nil {
				return err
			}
			if !took {
				// The attempt claimed its fate first (or finished): look again.
				return s.recoverAgain(mp, dir, id, now, rep)
			}
			if testHookAfterReap != nil {
				testHookAfterReap(dir)
			}
		default:
			return err
		}
	}
	switch {
	case m != nil && m.Attempt == id:
		if err := s.rollForward(m); err != nil {
			return err
		}
		s.log.Info("recovery rolled a commit forward", "manifest", mp)
		rep.RolledForward = append(rep.RolledForward, m.Start)
	default:
		if err := s.fs.RemoveAll(dir); err != nil {
			return err
		}
		s.log.Info("recovery deleted an attempt", "dir", dir, "lost", m != nil)
		rep.Discarded = append(rep.Discarded, dir)
	}
	return nil
}

// recoverAgain re-reads the manifest after an attempt raced recovery.
func (s *Store) recoverAgain(mp, dir, id string, now time.Time, rep *RecoveryReport) error {
	m, err := s.awaitManifest(mp)
	if err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	if ok, err := vfs.Exists(s.fs, dir); err != nil || !ok {
		return err // the attempt finished and cleaned up
	}
	if m == nil {
		if _, _, err := s.readFate(path.Join(dir, fateName)); err != nil {
			return err
		}
	}
	return s.recoverAttempt(m, mp, dir, id, now, rep)
}

// completeIntent creates a split's manifest from an attempt's intent (or
// finds it created) and returns the manifest that stands.
func (s *Store) completeIntent(mp string, intent *Manifest) (*Manifest, error) {
	data, err := intent.Encode()
	if err != nil {
		return nil, err
	}
	if err := s.fs.WriteExclusive(mp, data); err != nil && !errors.Is(err, vfs.ErrExist) {
		return nil, fmt.Errorf("writers: completing the commit of %s: %w", mp, err)
	}
	m, err := s.awaitManifest(mp)
	if err != nil {
		return nil, fmt.Errorf("writers: completing the commit of %s: %w", mp, err)
	}
	s.log.Info("recovery completed a commit from its intent", "manifest", mp, "attempt", intent.Attempt)
	return m, nil
}

// removeStaleTemps deletes what a crash of a local WriteExclusive left in
// a partition's commits directory (<name>.tmp-<pid>-<n>) once it is older
// than TornGrace.
func (s *Store) removeStaleTemps(topic string, partition int32) error {
	dir := partDir(commitsDir, topic, partition)
	ents, err := s.fs.List(dir)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	now := s.opts.Clock.Now()
	for _, e := range ents {
		if !e.IsDir && strings.Contains(e.Name, ".tmp-") && (s.opts.TornGrace < 0 || now.Sub(e.ModTime) >= s.opts.TornGrace) {
			if err := s.fs.Remove(path.Join(dir, e.Name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Hooks for the race tests: between recovery's lease check and its reap,
// and between the reap and the deletion.
var testHookBeforeReap, testHookAfterReap func(dir string)
