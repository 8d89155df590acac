package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/cluster"
	"github.com/sluicehq/sluice/broker/replica"
)

// TestReplicaStatesOnlyHeld: of a cluster's partition states, a reconcile
// hands the replica Manager those with a replica here that are open, and
// stop states only for the partitions the Manager replicates that are no
// longer assigned here (or no longer exist) — not one for every other
// partition of the cluster at each reconcile.
func TestReplicaStatesOnlyHeld(t *testing.T) {
	const self = 1
	states := map[partitionKey]cluster.PartitionState{}
	add := func(topic string, p int32, replicas ...int32) {
		states[partitionKey{topic, p}] = cluster.PartitionState{Topic: topic, Partition: p, Leader: replicas[0], LeaderEpoch: 3,
			ISR: replicas, Replicas: replicas, Version: 7}
	}
	for p := range int32(1000) {
		add("elsewhere", p, 2, 3) // never a replica here
	}
	add("local", 0, 1, 2)
	add("local", 1, 2, 1)
	add("unopened", 0, 1, 3)
	add("moved", 0, 2, 3) // was here; reassigned away
	held := map[partitionKey]bool{{"local", 0}: true, {"moved", 0}: true, {"deleted", 4}: true}
	heldStates := []replica.State{{Topic: "local", Partition: 0}, {Topic: "moved", Partition: 0}, {Topic: "deleted", Partition: 4, LeaderEpoch: 9, Version: 2}}
	open := func(k partitionKey) bool { return k.topic != "unopened" }

	got := replicaStates(self, states, open, func(k partitionKey) bool { return held[k] }, heldStates)
	byKey := map[string]replica.State{}
	for _, st := range got {
		byKey[fmt.Sprintf("%s-%d", st.Topic, st.Partition)] = st
	}
	if len(got) != 4 {
		t.Errorf("%d states handed to the Manager, want 4 (local-0, local-1, moved-0 stopped, deleted-4 stopped): %v", len(got), keys(byKey))
	}
	for _, k := range []string{"local-0", "local-1"} {
		if st, ok := byKey[k]; !ok || len(st.ISR) == 0 || st.LeaderEpoch != 3 {
			t.Errorf("%s: %+v, want its state", k, st)
		}
	}
	if st, ok := byKey["moved-0"]; !ok || len(st.Replicas) != 2 || st.Replicas[0] == self || st.Replicas[1] == self {
		t.Errorf("moved-0: %+v, want a state naming replicas without this broker (a stop)", st)
	}
	if st, ok := byKey["deleted-4"]; !ok || st.Leader != -1 || len(st.Replicas) != 0 {
		t.Errorf("deleted-4: %+v, want a stop naming no replica", st)
	}
	if _, ok := byKey["unopened-0"]; ok {
		t.Errorf("unopened-0 handed over before its log is open")
	}
	for k := range byKey {
		if len(k) > 9 && k[:9] == "elsewhere" {
			t.Fatalf("%s handed to the Manager: never a replica here", k)
		}
	}
}

func keys(m map[string]replica.State) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestCoordinatorAppendErrorMapping: a coordinator's failed replicated
// append is answered as Kafka's GroupMetadataManager answers a failed
// produce to __consumer_offsets.
func TestCoordinatorAppendErrorMapping(t *testing.T) {
	for code, want := range map[int16]*kerr.Error{
		kerr.NotLeaderForPartition.Code:        kerr.NotCoordinator,
		kerr.KafkaStorageError.Code:            kerr.NotCoordinator,
		kerr.NotEnoughReplicas.Code:            kerr.CoordinatorNotAvailable,
		kerr.NotEnoughReplicasAfterAppend.Code: kerr.CoordinatorNotAvailable,
		kerr.UnknownTopicOrPartition.Code:      kerr.CoordinatorNotAvailable,
		kerr.RequestTimedOut.Code:              kerr.RequestTimedOut,
	} {
		err := coordinatorAppendError("__consumer_offsets", 7, code)
		var got *kerr.Error
		if !errors.As(err, &got) || got != want {
			t.Errorf("%v: %v, want %v", kerr.ErrorForCode(code), err, want)
		}
	}
}
