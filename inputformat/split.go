package inputformat

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/topicname"
)

// Errors of planning and reading.
var (
	// ErrOutOfRange reports a split or checkpoint below the partition's log
	// start offset: records were deleted before they were loaded.
	ErrOutOfRange = errors.New("inputformat: offset out of range")
	// ErrSplit reports a malformed split.
	ErrSplit = errors.New("inputformat: bad split")
	// ErrTruncated reports a partition whose log ends below a split's end
	// (an unclean leader change lost records the plan had seen).
	ErrTruncated = errors.New("inputformat: partition truncated below split end")
	// ErrNoTopic reports a job topic the cluster does not have.
	ErrNoTopic = errors.New("inputformat: unknown topic")
)

// Split is an offset range [Start, End) of one topic partition: one task.
type Split struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
}

// ID names the split within its job's plan: topic-partition-start (the
// scheduler's task id: attempt names in ZooKeeper and logs carry it).
func (s Split) ID() string { return fmt.Sprintf("%s-%d-%d", s.Topic, s.Partition, s.Start) }

func (s Split) String() string {
	return fmt.Sprintf("%s/%d [%d, %d)", s.Topic, s.Partition, s.Start, s.End)
}

// Len returns the number of offsets the split covers.
func (s Split) Len() int64 { return s.End - s.Start }

// Validate checks the topic name and the range.
func (s Split) Validate() error {
	if err := topicname.Check(s.Topic); err != nil {
		return fmt.Errorf("%w: %w", ErrSplit, err)
	}
	if s.Partition < 0 || s.Start < 0 || s.End < s.Start {
		return fmt.Errorf("%w: %s", ErrSplit, s)
	}
	return nil
}
