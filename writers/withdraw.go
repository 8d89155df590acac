package writers

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/vfs"
)

// ErrWithdrawal reports a Withdraw that cannot start because an
// interrupted withdrawal from another offset is unfinished.
var ErrWithdrawal = errors.New("writers: withdrawal")

// unfinished marks a withdrawal directory until its last move is done.
const unfinished = ".unfinished"

// Withdraw takes back the commits of a partition whose start is at or after
// from (for a replay from a checkpoint): their files and manifests are moved
// under _sluice/withdrawn/<topic>/<partition>/<from>-<time>/ keeping their
// relative paths; nothing is deleted. The directory carries the suffix
// .unfinished until the last move is done, so an interrupted Withdraw run
// again with the same from continues the same withdrawal (one directory);
// one from another offset is refused (ErrWithdrawal) until that one is
// finished. Newest commits go first and each manifest moves after its files.
// It returns the manifests this call withdrew and the withdrawal directory.
// No attempt of the partition may be committing meanwhile.
func (s *Store) Withdraw(topic string, partition int32, from int64) ([]*Manifest, string, error) {
	if _, err := s.Recover(topic, partition); err != nil {
		return nil, "", err
	}
	base := partDir(withdrawnDir, topic, partition)
	work, err := s.unfinishedWithdrawal(base, from)
	if err != nil {
		return nil, "", err
	}
	if work == "" {
		id := fmt.Sprintf("%020d-%s", from, s.opts.Clock.Now().UTC().Format("20060102T150405.000000000Z"))
		work = path.Join(base, id+unfinished)
		if err := s.fs.MkdirAll(work); err != nil {
			return nil, "", err
		}
	}
	dest := strings.TrimSuffix(work, unfinished)
	starts, err := s.starts(topic, partition)
	if err != nil {
		return nil, "", err
	}
	var out []*Manifest
	for i := len(starts) - 1; i >= 0 && starts[i] >= from; i-- {
		mp := ManifestPath(topic, partition, starts[i])
		m, err := s.readManifest(mp)
		if err != nil {
			return out, dest, err
		}
		for _, f := range m.Files {
			if err := s.moveInto(work, f.Final); err != nil {
				return out, dest, err
			}
		}
		if err := s.moveInto(work, mp); err != nil {
			return out, dest, err
		}
		s.log.Info("withdrew commit", "manifest", mp, "to", dest)
		out = append(out, m)
	}
	if err := s.fs.RenameNoReplace(work, dest); err != nil {
		return out, dest, fmt.Errorf("writers: finishing the withdrawal %s: %w", dest, err)
	}
	return out, dest, nil
}

// moveInto moves p to work/p; a p already moved is done.
func (s *Store) moveInto(work, p string) error {
	to := path.Join(work, p)
	if err := s.fs.MkdirAll(path.Dir(to)); err != nil {
		return err
	}
	if err := s.fs.RenameNoReplace(p, to); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return fmt.Errorf("writers: withdraw %s: %w", p, err)
	}
	return nil
}

// unfinishedWithdrawal returns the directory of an interrupted withdrawal
// from the same offset ("" if none), or ErrWithdrawal for one from another.
func (s *Store) unfinishedWithdrawal(base string, from int64) (string, error) {
	ents, err := s.fs.List(base)
	if errors.Is(err, vfs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if !e.IsDir || !strings.HasSuffix(e.Name, unfinished) {
			continue
		}
		at, _, _ := strings.Cut(e.Name, "-")
		if n, err := strconv.ParseInt(at, 10, 64); err != nil || n != from {
			return "", fmt.Errorf("%w: the withdrawal %s was interrupted: run it again (from offset %d) first", ErrWithdrawal, path.Join(base, e.Name), n)
		}
		return path.Join(base, e.Name), nil
	}
	return "", nil
}
