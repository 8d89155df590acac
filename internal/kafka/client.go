package kafka

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultBootstrap is the broker address the tools use when none is given.
const DefaultBootstrap = "127.0.0.1:9092"

// ErrBadInput is wrapped by every error that a user's flags or input caused.
var ErrBadInput = errors.New("kafka: bad input")

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// SplitBootstrap turns "h1:p1,h2:p2" into a seed list, checking each entry
// has a port.
func SplitBootstrap(bootstrap string) ([]string, error) {
	if strings.TrimSpace(bootstrap) == "" {
		bootstrap = DefaultBootstrap
	}
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		i := strings.LastIndexByte(s, ':')
		if i <= 0 || i == len(s)-1 {
			return nil, badInput("bootstrap address %q needs HOST:PORT", s)
		}
		if _, err := strconv.ParseUint(s[i+1:], 10, 16); err != nil {
			return nil, badInput("bootstrap address %q has a bad port", s)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, badInput("no bootstrap address")
	}
	return seeds, nil
}

// ParseCompression maps none|gzip|snappy|lz4|zstd to a franz-go codec.
func ParseCompression(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), badInput("unknown compression %q (want none, gzip, snappy, lz4 or zstd)", name)
}

// ParseAcks maps "all", "-1", "1" and "0" to franz-go acks, and reports
// whether idempotent writes are possible (they need acks=all).
func ParseAcks(s string) (kgo.Acks, bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "all", "-1":
		return kgo.AllISRAcks(), true, nil
	case "1", "leader":
		return kgo.LeaderAck(), false, nil
	case "0", "none":
		return kgo.NoAck(), false, nil
	}
	return kgo.AllISRAcks(), false, badInput("unknown acks %q (want all, -1, 1 or 0)", s)
}

// ProducerConfig is what the producing tools share.
type ProducerConfig struct {
	// Bootstrap is a comma-separated HOST:PORT list.
	Bootstrap string
	// Compression is none, gzip, snappy, lz4 or zstd.
	Compression string
	// Acks is all (-1), 1 or 0.
	Acks string
	// Linger is how long a partition's batch waits for more records; negative keeps franz-go's default.
	LingerMs int
	// BatchMaxBytes caps one record batch; 0 keeps franz-go's default.
	BatchMaxBytes int32
	// ManualPartition routes each record to its Partition field.
	ManualPartition bool
}

func (c ProducerConfig) options() ([]kgo.Opt, error) {
	seeds, err := SplitBootstrap(c.Bootstrap)
	if err != nil {
		return nil, err
	}
	codec, err := ParseCompression(c.Compression)
	if err != nil {
		return nil, err
	}
	acks, idempotent, err := ParseAcks(c.Acks)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ProducerBatchCompression(codec), kgo.RequiredAcks(acks)}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if c.LingerMs >= 0 {
		opts = append(opts, kgo.ProducerLinger(msDuration(c.LingerMs)))
	}
	if c.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(c.BatchMaxBytes))
	}
	if c.ManualPartition {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts, nil
}
