// Package kafka holds the logic of sluice's Kafka command-line tools, which
// cmd/sluice is the only user of: bootstrap lists, codec and acks names and
// the franz-go options built from them, topic and group administration, a
// line producer, a consumer with a record formatter, and producer / consumer
// benchmarks in the manner of Apache Kafka's ProducerPerformance and
// ConsumerPerformance. Everything talks to a broker over the wire through
// franz-go (kgo, kadm), so the same tools work against a sluice broker and
// against Apache Kafka.
//
//	stdin lines ──► Produce ──► kgo.Client ──► broker (sluice or Kafka)
//	                                              │
//	stdout ◄── Formatter ◄── Consume ◄── kgo.Client
//
// Security (security.go) is how every client here, the loader's and the
// registry's connect to a secured cluster: SASL PLAIN / SCRAM and TLS from PEM
// files, from flags, a Kafka client properties file (properties.go) or a job
// spec; its password is a Secret that never prints.
//
// cmd/sluice only parses flags into the option structs of this package.
// Every function returns an error wrapping ErrBadInput when the user's input
// cannot work (an unknown codec, a malformed --from, a missing topic name), so
// the command can exit non-zero with a one-line reason. The benchmarks read
// time from their Options' Clock (internal/clock; nil is the real clock).
package kafka
