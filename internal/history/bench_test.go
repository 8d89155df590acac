package history

import (
	"fmt"
	"testing"
)

// powerLossHistory is the shape of TestBrokerPowerLoss's history: rounds
// of perRound acknowledged produces, each round to a partition of its own,
// each followed by a final read of that partition. The lost check ran in
// produces × final reads; it is to grow with the history.
func powerLossHistory(rounds, perRound int) History {
	r := NewRecorder(nil)
	for round := 0; round < rounds; round++ {
		topic := fmt.Sprintf("pl%d", round)
		var rs []Record
		for i := 0; i < perRound; i++ {
			v := fmt.Sprintf("%d-%d", round, i)
			r.Invoke(round, Produce).Complete(Op{Outcome: OK, Topic: topic, Offset: int64(i), Value: v})
			rs = append(rs, Record{Topic: topic, Offset: int64(i), Value: v})
		}
		r.Invoke(round, FinalRead).Complete(Op{Outcome: OK, Records: rs, Ranges: []Range{{Topic: topic, Start: 0, End: int64(perRound)}}})
	}
	return r.History()
}

// BenchmarkCheckPowerLoss: Check over power-loss histories of growing
// rounds (100 produces each); ns/op should grow about as the rounds do.
func BenchmarkCheckPowerLoss(b *testing.B) {
	for _, rounds := range []int{100, 400, 1600} {
		h := powerLossHistory(rounds, 100)
		b.Run(fmt.Sprintf("rounds=%d", rounds), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if res := Check(h); !res.OK() {
					b.Fatal(res.Report(h, 1))
				}
			}
		})
	}
}
