package server

// ListTransactions (key 66), versions 0-2.
//
// The transactional ids this broker coordinates, filtered by state names
// (unknown names are listed back in unknown_state_filters and match
// nothing else), producer ids, v1's minimum duration (only transactions
// open at least that long) and v2's transactional id pattern (a regular
// expression that must match the whole id; Go's RE2 syntax, which Kafka's
// RE2/J shares; INVALID_REGULAR_EXPRESSION if it does not compile or is
// over 1 KiB). Bounds: at most maxListedTransactions entries are answered;
// unknown state names are answered once each, at most
// maxUnknownStateFilters of them (deviation: Kafka lists every one given).

import (
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/txn"
)

const (
	maxListedTransactions = 100000
	maxTxnPatternBytes    = 1024
	// maxUnknownStateFilters bounds the distinct unknown state names
	// answered back (there are 8 states).
	maxUnknownStateFilters = 64
)

func handleListTransactions(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.Filter{Limit: maxListedTransactions}
	unknownOnly := false
	if len(req.StateFilters) > 0 {
		f.States = map[kmsg.TransactionState]bool{}
		unknown := map[string]bool{}
		for _, name := range req.StateFilters {
			st, ok := parseTransactionState(name)
			if !ok {
				if !unknown[name] && len(unknown) < maxUnknownStateFilters {
					unknown[name] = true
					resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
				}
				continue
			}
			f.States[st] = true
		}
		unknownOnly = len(f.States) == 0
	}
	if len(req.ProducerIDFilters) > 0 {
		f.ProducerIDs = map[int64]bool{}
		for _, id := range req.ProducerIDFilters {
			f.ProducerIDs[id] = true
		}
	}
	if req.DurationFilterMillis > 0 {
		f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	if req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		pat := *req.TransactionalIDPattern
		re, err := regexp.Compile("^(?:" + pat + ")$")
		if err != nil || len(pat) > maxTxnPatternBytes {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return kmsgReply{resp}, nil
		}
		f.Match = re.MatchString
	}
	if unknownOnly {
		return kmsgReply{resp}, nil
	}
	for _, d := range s.txn.List(f) {
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = d.TransactionalID, d.ProducerID, d.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return kmsgReply{resp}, nil
}

// transactionStates maps the states' names, lower-cased, to the states.
var transactionStates = func() map[string]kmsg.TransactionState {
	m := map[string]kmsg.TransactionState{}
	for st := kmsg.TransactionStateEmpty; st <= kmsg.TransactionStatePrepareEpochFence; st++ {
		m[strings.ToLower(st.String())] = st
	}
	return m
}()

var stateNameSeparators = strings.NewReplacer(".", "", "_", "", "-", "")

// parseTransactionState reads a state name as kmsg.ParseTransactionState
// does (any case; '.', '_' and '-' ignored) without building an error for
// an unknown one: that error was ~160 bytes per name, 650 MB for a 4 MB
// request of empty names.
func parseTransactionState(name string) (kmsg.TransactionState, bool) {
	st, ok := transactionStates[strings.ToLower(strings.TrimSpace(stateNameSeparators.Replace(name)))]
	return st, ok
}
