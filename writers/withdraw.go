package writers

import (
	"errors"
	"fmt"
	"path"
	"sort"

	"github.com/sluicehq/sluice/writers/filesystem"
)

// Withdraw takes back the commits of a partition whose start is at or after
// from (for a replay from a checkpoint): their files and manifests are moved
// under _sluice/withdrawn/<topic>/<partition>/<id>/ keeping their relative
// paths; nothing is deleted. Newest commits go first and each manifest moves
// after its files, so an interrupted Withdraw is finished by running it again.
// It returns the withdrawn manifests and the directory they went to. No
// attempt of the partition may be committing meanwhile.
func (s *Store) Withdraw(topic string, partition int32, from int64) ([]*Manifest, string, error) {
	if _, err := s.Recover(topic, partition); err != nil {
		return nil, "", err
	}
	ms, err := s.Commits(topic, partition)
	if err != nil {
		return nil, "", err
	}
	id := fmt.Sprintf("%020d-%s", from, s.opts.Clock().UTC().Format("20060102T150405.000000000Z"))
	dest := path.Join(partDir(withdrawnDir, topic, partition), id)
	var out []*Manifest
	sort.Slice(ms, func(i, j int) bool { return ms[i].Start > ms[j].Start })
	for _, m := range ms {
		if m.Start < from {
			continue
		}
		for _, f := range m.Files {
			to := path.Join(dest, f.Final)
			if err := s.fs.MkdirAll(path.Dir(to)); err != nil {
				return out, dest, err
			}
			if err := s.fs.Rename(f.Final, to); err != nil && !errors.Is(err, filesystem.ErrNotExist) {
				return out, dest, fmt.Errorf("writers: withdraw %s: %w", f.Final, err)
			}
		}
		mp := ManifestPath(topic, partition, m.Start)
		to := path.Join(dest, mp)
		if err := s.fs.MkdirAll(path.Dir(to)); err != nil {
			return out, dest, err
		}
		if err := s.fs.Rename(mp, to); err != nil {
			return out, dest, fmt.Errorf("writers: withdraw %s: %w", mp, err)
		}
		s.log.Info("withdrew commit", "manifest", mp, "to", to)
		out = append(out, m)
	}
	return out, dest, nil
}
