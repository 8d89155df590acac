package cluster

import (
	"slices"
	"testing"
)

// FuzzZNodes: the znode decoders never panic on any bytes, and what they
// accept re-encodes to the same decision (state) or assignment.
func FuzzZNodes(f *testing.F) {
	f.Add([]byte(`{"version":1,"leader":1,"leader_epoch":4,"isr":[1,3],"controller_epoch":7}`))
	f.Add([]byte(`{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ"}`))
	f.Add(encodeBroker(BrokerInfo{ID: 1, Host: "h", Port: 1, Rack: "r", Endpoints: []Endpoint{{"REPLICATION", "h", 2}}}, 0))
	f.Add([]byte(`{"partitions":{"5":[1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, err := decodeState("t", 0, data, 3); err == nil {
			again, err := decodeState("t", 0, encodeState(st), 3)
			if err != nil || !sameDecision(st, again) && !(len(st.ISR) == 0 && len(again.ISR) == 0) {
				t.Fatalf("state %q: %+v -> %+v, %v", data, st, again, err)
			}
		}
		if a, err := decodeAssignment("t", data); err == nil {
			again, err := decodeAssignment("t", encodeAssignment(a))
			if err != nil || len(again.Replicas) != len(a.Replicas) || again.ID != a.ID {
				t.Fatalf("assignment %q: %+v -> %+v, %v", data, a, again, err)
			}
			for p := range a.Replicas {
				if !slices.Equal(a.Replicas[p], again.Replicas[p]) {
					t.Fatalf("assignment %q: partition %d", data, p)
				}
			}
		}
		_, _ = decodeBroker(1, data)
	})
}
