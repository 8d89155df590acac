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

// SplitBootstrap turns "h1:p1,h2:p2" into a seed list (DefaultBootstrap
// when empty), each entry checked by CheckAddress. Spaces around entries
// and empty entries are dropped.
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
		if err := CheckAddress(s); err != nil {
			return nil, badInput("bootstrap address %v", err)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, badInput("no bootstrap address")
	}
	return seeds, nil
}

// AddressError reports a bootstrap entry that is not HOST:PORT with a port
// of 1 to 65535. It wraps ErrBadInput; its message names the entry and the
// problem (`"localhost" is not HOST:PORT`), so callers may put it after
// their own field name.
type AddressError struct {
	// Address is the entry as given.
	Address string
	// BadPort is set when the entry is HOST:PORT but the port is out of range.
	BadPort bool
}

func (e *AddressError) Error() string {
	if e.BadPort {
		return fmt.Sprintf("%q: the port must be 1 to 65535", e.Address)
	}
	return fmt.Sprintf("%q is not HOST:PORT", e.Address)
}

// Unwrap returns ErrBadInput.
func (e *AddressError) Unwrap() error { return ErrBadInput }

// CheckAddress checks one bootstrap entry: a non-empty host (a name, an
// IPv4 address or a bracketed IPv6 address), a colon and a decimal port of 1
// to 65535. The error is an *AddressError. The tools (SplitBootstrap) and
// the loader's job spec both check entries here.
func CheckAddress(addr string) error {
	i := strings.LastIndexByte(addr, ':')
	if i <= 0 || i == len(addr)-1 || strings.Trim(addr[i+1:], "0123456789") != "" {
		return &AddressError{Address: addr}
	}
	if port, err := strconv.Atoi(addr[i+1:]); err != nil || port < 1 || port > 65535 {
		return &AddressError{Address: addr, BadPort: true}
	}
	return nil
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
	// Security is how the client authenticates and encrypts.
	Security Security
	// Hooks are installed in the producing client (kgo.WithHooks), such
	// as internal/audit's counting Hook.
	Hooks []kgo.Hook
}

func (c ProducerConfig) options() ([]kgo.Opt, error) {
	opts, err := ClientOptions(c.Bootstrap, c.Security)
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
	opts = append(opts, kgo.ProducerBatchCompression(codec), kgo.RequiredAcks(acks))
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
	if len(c.Hooks) > 0 {
		opts = append(opts, kgo.WithHooks(c.Hooks...))
	}
	return opts, nil
}
