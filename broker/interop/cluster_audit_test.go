package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/audit"
)

// The broker audit tier in a cluster of three brokers, a topic of three
// partitions with three replicas each: only each partition's leader counts
// what it appends (a follower's replicated appends are not counted), so
// the broker tier holds each produced record once, every window balances
// the producer tier, and the counts come from the three brokers (one
// origin each, "node-N/...").
func TestClusterAuditBrokerTierCountsLeadersOnly(t *testing.T) {
	c := startBrokerCluster(t, 3, "audit.enable=true", "audit.publish.interval.ms=100")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	resp, err := adm.CreateTopic(ctx, 3, 3, nil, "audited")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	leaders := c.waitLeaders("audited", 3, c.ids()...)
	p, err := audit.StartProducer([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...)}, audit.DefaultWindow, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.client(kgo.WithHooks(p.Hook), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	at := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	const n = 600
	for i := range n {
		r := &kgo.Record{Topic: "audited", Value: []byte(fmt.Sprint(i)), Timestamp: at.Add(time.Duration(i) * 3 * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var origins map[string]bool
	eventually(t, 30*time.Second, "the broker tier balances every window", func() error {
		counts, err := audit.ReadCounts(ctx, []kgo.Opt{kgo.SeedBrokers(c.bootstrap()...)})
		if err != nil {
			return err
		}
		rep, err := audit.Balance(counts.Counts, nil, audit.Options{Now: time.Now(), Topic: "audited"})
		if err != nil {
			return err
		}
		var produced, broker int64
		var judged, clock int
		origins = map[string]bool{}
		for _, w := range rep.Windows {
			if w.State == audit.StateClock {
				clock += int(w.Tiers[audit.TierBrokerClock].Messages)
				continue // appended now: the windows of the brokers' clock
			}
			judged++
			produced += w.Tiers[audit.TierProducer].Messages
			broker += w.Tiers[audit.TierBroker].Messages
		}
		for _, cn := range counts.Counts {
			if cn.Tier == audit.TierBroker && cn.Topic == "audited" {
				origins[cn.Origin[:strings.Index(cn.Origin, "/")]] = true
			}
		}
		if produced != n || broker != n || clock != n || rep.Unbalanced != 0 || rep.Balanced != judged || judged != 3 {
			return fmt.Errorf("producer tier %d, broker tier %d (by its clock %d) of %d; %d of %d windows balanced, want 3", produced, broker, clock, n, rep.Balanced, judged)
		}
		return nil
	})
	want := map[string]bool{}
	for _, v := range leaders {
		want[fmt.Sprintf("node-%d", v.Leader)] = true
	}
	if fmt.Sprint(origins) != fmt.Sprint(want) {
		t.Errorf("broker tier origins %v, want the leaders' %v", origins, want)
	}
}
