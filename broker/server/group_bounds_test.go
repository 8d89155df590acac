package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// paddedBalancer is a balancer whose subscription carries pad bytes of
// user data (as an assignor with large user data does).
type paddedBalancer struct {
	kgo.GroupBalancer
	pad int
}

func (b paddedBalancer) JoinGroupMetadata(interests []string, _ map[string][]int32, _ int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics, meta.UserData = interests, make([]byte, b.pad)
	return meta.AppendTo(nil)
}

// TestGroupJoinPastMetadataBoundFailsTheClient: a franz-go consumer whose
// group metadata is larger than group.max.metadata.bytes gets the
// non-retriable MESSAGE_TOO_LARGE from PollFetches (instead of a join
// retried for ever), the broker holds nothing of it, and a consumer within
// the bound joins the same group.
func TestGroupJoinPastMetadataBoundFailsTheClient(t *testing.T) {
	ts := startServer(t, "", groupProps(t, map[string]string{"group.max.metadata.bytes": strconv.Itoa(1 << 20)}))
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, ts.addr))
	const topic, group = "orders", "big"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	big := newClient(t, ts.addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(paddedBalancer{kgo.RangeBalancer(), 2 << 20}), kgo.SessionTimeout(6*time.Second))
	var got error
	for got == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := big.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatal("the consumer with 2 MiB of metadata never saw an error (group.max.metadata.bytes is 1 MiB)")
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, kerr.MessageTooLarge) {
				got = err
			}
		})
	}
	t.Logf("the client saw: %v", got)
	if st := ts.groups.Stats(); st.Members != 0 || st.Bytes > 64<<10 {
		t.Fatalf("after the refused join the coordinator holds %d members, %d bytes", st.Members, st.Bytes)
	}
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "sluice_group_bytes ") {
		t.Error("/metrics lacks sluice_group_bytes")
	}
	big.Close()

	small := newClient(t, ts.addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(paddedBalancer{kgo.RangeBalancer(), 1 << 10}), kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(200*time.Millisecond))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			small.PollFetches(pctx)
			cancel()
		}
	}()
	waitGroup(t, adm, group, 1)
	close(stop)
	<-done
}
