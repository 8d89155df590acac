package log

import (
	"fmt"
	"math"
	"time"
)

// TimestampType is the topic's message.timestamp.type.
type TimestampType int8

const (
	// CreateTime keeps the producer's timestamps.
	CreateTime TimestampType = 0
	// LogAppendTime stamps each batch with the broker's clock at append.
	LogAppendTime TimestampType = 1
)

// Config is the per-partition configuration; the Kafka topic-config names are
// given next to each field.
type Config struct {
	SegmentBytes       int64         // segment.bytes, default 1 GiB
	SegmentMs          time.Duration // segment.ms, default 7 days
	IndexIntervalBytes int           // index.interval.bytes, default 4096
	SegmentIndexBytes  int           // segment.index.bytes, default 10 MiB
	RetentionMs        time.Duration // retention.ms, default 7 days; < 0 = forever; 0 = delete what is older than now
	RetentionBytes     int64         // retention.bytes, default -1; < 0 = no limit; 0 = delete every non-empty segment
	FlushMessages      int64         // flush.messages, default 0 = leave it to the page cache
	FlushMs            time.Duration // flush.ms, default 0 = page cache
	MaxMessageBytes    int           // max.message.bytes (largest batch), default 1048588
	TimestampType      TimestampType // message.timestamp.type, default CreateTime
	Compact            bool          // cleanup.policy includes compact: Compact keeps the newest record per key
	DeleteRetention    time.Duration // delete.retention.ms, default 1 day: how long compaction keeps tombstones
	// ProducerIDExpiration is the broker's producer.id.expiration.ms
	// (default 1 day): an idempotent producer idle this long is forgotten.
	ProducerIDExpiration time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:         1 << 30,
		SegmentMs:            7 * 24 * time.Hour,
		IndexIntervalBytes:   4096,
		SegmentIndexBytes:    10 << 20,
		RetentionMs:          7 * 24 * time.Hour,
		RetentionBytes:       -1,
		MaxMessageBytes:      1048588,
		TimestampType:        CreateTime,
		DeleteRetention:      24 * time.Hour,
		ProducerIDExpiration: 24 * time.Hour,
	}
}

// normalize checks a config and fills zero values with defaults (except
// the retention limits, whose zero is a real value).
func (c Config) normalize() (Config, error) {
	d := DefaultConfig()
	if c.SegmentBytes == 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentMs == 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.SegmentIndexBytes == 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	// RetentionMs and RetentionBytes have no zero default: 0 means what it
	// means in Kafka (keep nothing that retention may delete).
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.DeleteRetention == 0 {
		c.DeleteRetention = d.DeleteRetention
	}
	if c.ProducerIDExpiration <= 0 {
		c.ProducerIDExpiration = d.ProducerIDExpiration
	}
	switch {
	case c.SegmentBytes < batchHeaderSize || c.SegmentBytes > math.MaxInt32:
		return c, fmt.Errorf("log: segment.bytes %d must be between %d and %d", c.SegmentBytes, batchHeaderSize, math.MaxInt32)
	case c.SegmentMs < 0:
		return c, fmt.Errorf("log: segment.ms %v must be positive", c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return c, fmt.Errorf("log: index.interval.bytes %d must not be negative", c.IndexIntervalBytes)
	case c.SegmentIndexBytes < 2*indexEntrySize:
		return c, fmt.Errorf("log: segment.index.bytes %d must be at least %d", c.SegmentIndexBytes, 2*indexEntrySize)
	case c.FlushMessages < 0 || c.FlushMs < 0:
		return c, fmt.Errorf("log: flush.messages and flush.ms must not be negative")
	case c.MaxMessageBytes < batchHeaderSize:
		return c, fmt.Errorf("log: max.message.bytes %d must be at least %d", c.MaxMessageBytes, batchHeaderSize)
	case c.TimestampType != CreateTime && c.TimestampType != LogAppendTime:
		return c, fmt.Errorf("log: unknown message.timestamp.type %d", c.TimestampType)
	}
	return c, nil
}
