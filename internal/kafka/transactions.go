package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TransactionStates are the states a transactional id can be in (Kafka's
// names, as ListTransactions filters them).
var TransactionStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// ParseTransactionStates maps --state values (any case, comma-separated
// or repeated) to Kafka's state names.
func ParseTransactionStates(in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		for _, one := range strings.Split(s, ",") {
			one = strings.TrimSpace(one)
			if one == "" {
				continue
			}
			found := ""
			for _, st := range TransactionStates {
				if strings.EqualFold(st, one) {
					found = st
				}
			}
			if found == "" {
				return nil, badInput("--state %q is not a transaction state (want one of %s)", one, strings.Join(TransactionStates, ", "))
			}
			out = append(out, found)
		}
	}
	return out, nil
}

// TxnPartitions is one topic's partitions in a transaction.
type TxnPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// Transaction is a transactional id as its coordinator lists or describes
// it (the --json of `sluice transactions`). Listing fills only the id,
// state, producer id and coordinator.
type Transaction struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	Coordinator     int32  `json:"coordinator"`
	// TimeoutMs is the producer's transaction.timeout.ms.
	TimeoutMs int32 `json:"timeout_ms"`
	// StartMs is when the ongoing transaction began (Unix ms, -1: none).
	StartMs int64 `json:"start_ms"`
	// Partitions are the ongoing transaction's partitions (while it ends,
	// those without a marker yet).
	Partitions []TxnPartitions `json:"partitions"`
}

// ListTransactions returns the transactional ids of every coordinator,
// sorted, only those in one of states when states is not empty.
func (a *Admin) ListTransactions(ctx context.Context, states []string) ([]Transaction, error) {
	listed, err := a.adm.ListTransactions(ctx, nil, states)
	if err != nil {
		return nil, fmt.Errorf("kafka: list transactions: %w", err)
	}
	out := make([]Transaction, 0, len(listed))
	for _, l := range listed.Sorted() {
		out = append(out, Transaction{TransactionalID: l.TxnID, State: l.State, ProducerID: l.ProducerID, ProducerEpoch: -1,
			Coordinator: l.Coordinator, TimeoutMs: -1, StartMs: -1})
	}
	return out, nil
}

// DescribeTransactions describes each transactional id; those the
// coordinators do not know are an error naming them (after the others).
func (a *Admin) DescribeTransactions(ctx context.Context, ids []string) ([]Transaction, error) {
	if len(ids) == 0 {
		return nil, badInput("name at least one transactional id")
	}
	described, err := a.adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return nil, fmt.Errorf("kafka: describe transactions: %w", err)
	}
	var out []Transaction
	var errs []error
	for _, id := range ids {
		d, ok := described[id]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("kafka: transactional id %q: not returned by the broker", id))
			continue
		case d.Err != nil:
			errs = append(errs, fmt.Errorf("kafka: transactional id %q: %w", id, d.Err))
			continue
		}
		t := Transaction{TransactionalID: d.TxnID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
			Coordinator: d.Coordinator, TimeoutMs: d.TimeoutMillis, StartMs: d.StartTimestamp, Partitions: txnPartitions(d.Topics)}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

func txnPartitions(ts kadm.TopicsSet) []TxnPartitions {
	out := []TxnPartitions{}
	for topic, ps := range ts {
		tp := TxnPartitions{Topic: topic}
		for p := range ps {
			tp.Partitions = append(tp.Partitions, p)
		}
		sort.Slice(tp.Partitions, func(i, j int) bool { return tp.Partitions[i] < tp.Partitions[j] })
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// WriteTransactions prints transactions as JSON (an array) or as a table:
// a listing's columns, or with describe the epoch, timeout, start and
// partitions too.
func WriteTransactions(w io.Writer, txns []Transaction, asJSON, describe bool) error {
	if asJSON {
		if txns == nil {
			txns = []Transaction{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(txns)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !describe {
		fmt.Fprintln(tw, "TRANSACTIONAL ID\tSTATE\tPRODUCER ID\tCOORDINATOR")
		for _, t := range txns {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", t.TransactionalID, t.State, t.ProducerID, t.Coordinator)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "TRANSACTIONAL ID\tSTATE\tPRODUCER ID\tEPOCH\tTIMEOUT\tSTARTED\tPARTITIONS")
	for _, t := range txns {
		started := "-"
		if t.StartMs >= 0 && t.State != "Empty" {
			started = time.UnixMilli(t.StartMs).UTC().Format(time.RFC3339Nano)
		}
		var parts []string
		for _, tp := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s%v", tp.Topic, tp.Partitions))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", t.TransactionalID, t.State, t.ProducerID, t.ProducerEpoch,
			time.Duration(t.TimeoutMs)*time.Millisecond, started, orDash(strings.Join(parts, " ")))
	}
	return tw.Flush()
}
