package config

import (
	"fmt"
	"strings"
)

// Txn is the transaction coordinator's part of the broker configuration,
// with Kafka's property names and defaults (Broker.Txn).
type Txn struct {
	MaxTimeoutMs      int64 // transaction.max.timeout.ms (900000): the largest transaction.timeout.ms a producer may ask
	StatePartitions   int64 // transaction.state.log.num.partitions (50)
	AbortCheckMs      int64 // transaction.abort.timed.out.transaction.cleanup.interval.ms (10000)
	MaxPartitions     int64 // transaction.max.partitions (sluice: 10000; Kafka: unbounded): partitions of one transaction
	MaxTransactionIDs int64 // transaction.max.ids (sluice: 100000; Kafka: unbounded): transactional ids held
}

var txnProps = []struct {
	name  string
	min   int64
	field func(*Txn) *int64
}{
	{"transaction.max.timeout.ms", 1, func(t *Txn) *int64 { return &t.MaxTimeoutMs }},
	{"transaction.state.log.num.partitions", 1, func(t *Txn) *int64 { return &t.StatePartitions }},
	{"transaction.abort.timed.out.transaction.cleanup.interval.ms", 1, func(t *Txn) *int64 { return &t.AbortCheckMs }},
	{"transaction.max.partitions", 1, func(t *Txn) *int64 { return &t.MaxPartitions }},
	{"transaction.max.ids", 1, func(t *Txn) *int64 { return &t.MaxTransactionIDs }},
}

// DefaultTxn returns Kafka's defaults (sluice's where Kafka has no bound).
func DefaultTxn() Txn {
	return Txn{MaxTimeoutMs: 900000, StatePartitions: 50, AbortCheckMs: 10000, MaxPartitions: 10000, MaxTransactionIDs: 100000}
}

// IsTxnProperty reports whether name is one of Txn's properties.
func IsTxnProperty(name string) bool {
	for _, p := range txnProps {
		if p.name == name {
			return true
		}
	}
	return false
}

// Txn returns the transaction properties set on b, over Kafka's defaults.
func (b Broker) Txn() (Txn, error) {
	t := DefaultTxn()
	for _, p := range txnProps {
		v, ok := b.props[p.name]
		if !ok {
			continue
		}
		n, err := parseInt64AtLeast(strings.TrimSpace(v), p.min)
		if err != nil {
			return Txn{}, fmt.Errorf("%w: %s: %v", ErrInvalid, p.name, err)
		}
		*p.field(&t) = n
	}
	return t, nil
}
