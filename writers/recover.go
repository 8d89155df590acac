package writers

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/sluicehq/sluice/writers/filesystem"
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
// _sluice/tmp/<topic>/<partition>/ (never a listing of the warehouse):
//
//   - the manifest names this attempt: finish its moves (roll forward);
//   - the manifest names another attempt: this one lost; delete it;
//   - no manifest: the attempt never committed; delete it once stale;
//   - a torn manifest older than TornGrace: its writer died mid-commit, so
//     nothing of it was moved; move it to _sluice/torn and treat the split
//     as uncommitted.
//
// Recover is idempotent and safe to run while other attempts are writing,
// given StaleAfter and TornGrace exceed how long a live attempt can stall.
func (s *Store) Recover(topic string, partition int32) (RecoveryReport, error) {
	var rep RecoveryReport
	base := partDir(tmpDir, topic, partition)
	starts, err := s.fs.List(base)
	if errors.Is(err, filesystem.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("writers: recover %s/%d: %w", topic, partition, err)
	}
	now := s.opts.Clock()
	for _, st := range starts {
		start, ok := parseStart(st.Name)
		if !st.IsDir || !ok {
			continue
		}
		mp := ManifestPath(topic, partition, start)
		m, merr := s.readManifest(mp)
		if errors.Is(merr, ErrTornManifest) {
			info, err := s.fs.Stat(mp)
			if err != nil {
				return rep, err
			}
			if s.opts.TornGrace > 0 && now.Sub(info.ModTime) < s.opts.TornGrace {
				rep.Pending = append(rep.Pending, path.Join(base, st.Name))
				continue
			}
			// Read once more: a slow writer may have finished meanwhile.
			if m, merr = s.readManifest(mp); errors.Is(merr, ErrTornManifest) {
				aside := path.Join(partDir(tornDir, topic, partition), fmt.Sprintf("%020d.json.%d", start, now.UnixNano()))
				if err := s.fs.MkdirAll(path.Dir(aside)); err != nil {
					return rep, err
				}
				if err := s.fs.Rename(mp, aside); err != nil {
					return rep, fmt.Errorf("writers: moving torn manifest %s aside: %w", mp, err)
				}
				s.log.Warn("torn manifest moved aside", "manifest", mp, "to", aside)
				rep.TornMovedAway = append(rep.TornMovedAway, start)
				m, merr = nil, filesystem.ErrNotExist
			}
		}
		if merr != nil && !errors.Is(merr, filesystem.ErrNotExist) {
			return rep, fmt.Errorf("writers: recover %s/%d: %w", topic, partition, merr)
		}
		attempts, err := s.fs.List(path.Join(base, st.Name))
		if err != nil && !errors.Is(err, filesystem.ErrNotExist) {
			return rep, err
		}
		for _, at := range attempts {
			dir := path.Join(base, st.Name, at.Name)
			switch {
			case m != nil && m.Attempt == at.Name:
				if err := s.rollForward(m); err != nil {
					return rep, err
				}
				s.log.Info("recovery rolled a commit forward", "manifest", mp)
				rep.RolledForward = append(rep.RolledForward, start)
			case m != nil:
				if err := s.fs.RemoveAll(dir); err != nil {
					return rep, err
				}
				rep.Discarded = append(rep.Discarded, dir)
			default:
				stale, err := s.stale(dir, now)
				if err != nil {
					return rep, err
				}
				if !stale {
					rep.Pending = append(rep.Pending, dir)
					continue
				}
				if err := s.fs.RemoveAll(dir); err != nil {
					return rep, err
				}
				s.log.Info("recovery deleted an uncommitted attempt", "dir", dir)
				rep.Discarded = append(rep.Discarded, dir)
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

// stale reports whether nothing under dir changed for StaleAfter.
func (s *Store) stale(dir string, now time.Time) (bool, error) {
	if s.opts.StaleAfter < 0 {
		return true, nil
	}
	newest, err := s.newest(dir)
	if err != nil {
		return false, err
	}
	return now.Sub(newest) >= s.opts.StaleAfter, nil
}

func (s *Store) newest(dir string) (time.Time, error) {
	ents, err := s.fs.List(dir)
	if err != nil {
		if errors.Is(err, filesystem.ErrNotExist) {
			return time.Time{}, nil
		}
		return time.Time{}, err
	}
	var t time.Time
	for _, e := range ents {
		mt := e.ModTime
		if e.IsDir {
			if mt, err = s.newest(path.Join(dir, e.Name)); err != nil {
				return t, err
			}
			if e.ModTime.After(mt) {
				mt = e.ModTime
			}
		}
		if mt.After(t) {
			t = mt
		}
	}
	return t, nil
}
