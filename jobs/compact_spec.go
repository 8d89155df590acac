package jobs

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Compact is the spec's `compact:` block: the scheduler compacts the job's
// complete time directories after its load runs (and `sluice compact`
// takes its values as defaults).
//
//	compact:
//	  after: 2h                  # a directory is compacted once its end (plus allowed_lateness) is this old
//	  target_file_bytes: 256MiB  # files are rewritten into as few files of about this size as possible
type Compact struct {
	After           string `yaml:"after"`
	TargetFileBytes string `yaml:"target_file_bytes"`
}

// Defaults of the compact: block.
const (
	DefaultCompactAfter       = 2 * time.Hour
	DefaultCompactTargetBytes = 256 << 20
	maxCompactAfter           = 365 * 24 * time.Hour
	minCompactTargetBytes     = 1 << 10
	maxCompactTargetBytes     = 64 << 30
)

// Enabled reports whether the spec has a compact: block (the scheduler
// compacts only then).
func (c Compact) Enabled() bool { return c.After != "" || c.TargetFileBytes != "" }

// AfterDuration returns compact.after (DefaultCompactAfter when unset).
func (c Compact) AfterDuration() time.Duration {
	if d, err := time.ParseDuration(c.After); err == nil && c.After != "" {
		return d
	}
	return DefaultCompactAfter
}

// TargetBytes returns compact.target_file_bytes (DefaultCompactTargetBytes
// when unset).
func (c Compact) TargetBytes() int64 {
	if n, err := ParseByteSize(c.TargetFileBytes); err == nil && c.TargetFileBytes != "" {
		return n
	}
	return DefaultCompactTargetBytes
}

func (s *Spec) validateCompact(bad badFunc) error {
	c := s.Compact
	if !c.Enabled() {
		return nil
	}
	if c.After != "" {
		d, err := time.ParseDuration(c.After)
		if err != nil || d < 0 || d > maxCompactAfter {
			return bad("compact.after", "%q: want a duration from 0s to %s (\"2h\")", c.After, maxCompactAfter)
		}
	}
	if c.TargetFileBytes != "" {
		n, err := ParseByteSize(c.TargetFileBytes)
		if err != nil || n < minCompactTargetBytes || n > maxCompactTargetBytes {
			return bad("compact.target_file_bytes", "%q: want a size from 1KiB to 64GiB (\"256MiB\", \"1GB\", or bytes)", c.TargetFileBytes)
		}
	}
	if s.Partition.By == "none" {
		return bad("compact", "partition.by is none: compaction rewrites complete time directories, so it needs hour or day")
	}
	return nil
}

// ParseByteSize reads a size: a number of bytes, or one with a unit (B,
// KB, MB, GB: powers of 1000; KiB, MiB, GiB: of 1024).
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mul    int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mul
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || n*float64(mul) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size (\"256MiB\")", s)
	}
	return int64(n * float64(mul)), nil
}
