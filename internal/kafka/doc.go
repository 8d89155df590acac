// Package kafka holds sluice's client side of the Kafka protocol: bootstrap lists, codec names and
// franz-go options (shared by the command-line tools and the loader), and the logic of the command-line tools:
// topic administration, a line producer, a consumer with a record formatter,
// and producer / consumer benchmarks in the manner of Apache Kafka's
// ProducerPerformance and ConsumerPerformance. Everything talks to a broker
// over the wire through franz-go (kgo, kadm), so the same tools work against
// a sluice broker and against Apache Kafka.
//
//	stdin lines ──► Produce ──► kgo.Client ──► broker (sluice or Kafka)
//	                                              │
//	stdout ◄── Formatter ◄── Consume ◄── kgo.Client
//
// cmd/sluice only parses flags into the option structs of this package.
// Every function returns an error wrapping ErrBadInput when the user's input
// cannot work (an unknown codec, a malformed --from, a missing topic name), so
// the command can exit non-zero with a one-line reason.
package kafka
