package replica_test

import (
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/broker/replica"
)

// fetchesServed scrapes how many Fetch requests a broker has answered.
func fetchesServed(t *testing.T, c *testCluster, id int32) int {
	t.Helper()
	rec := httptest.NewRecorder()
	c.node(id).srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	m := regexp.MustCompile(`(?m)^sluice_broker_requests_total\{api="Fetch"\} (\d+)`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A follower far behind (restarted after ~300 KiB were written) fetches up
// to replica.fetch.response.max.bytes of its lone partition per round trip
// once an answer came back full, not replica.fetch.max.bytes: with 4 KiB
// per partition and 64 KiB per answer it catches up in a handful of Fetches
// where 4 KiB ones would take over 70. The logs end identical.
func TestFollowerCatchUpFetchesMore(t *testing.T) {
	c := newClusterWith(t, 2, 1, 1, 300*time.Millisecond, func(o *replica.Options) {
		o.FetchPartitionMaxBytes, o.FetchMaxBytes = 4<<10, 64<<10
	})
	both := []int32{1, 2}
	c.elect(0, 1, both)
	h := newHistory()
	if err := c.produce(h, 1, 0, "before", 10); err != nil {
		t.Fatal(err)
	}
	c.waitFor("settle", c.settled)
	c.stop(2)
	pad := strings.Repeat("x", 1000)
	for i := range 300 {
		v := "down-" + strconv.Itoa(i) + "-" + pad
		code, off := c.produceRaw(1, 0, 1, v)
		if code != 0 {
			t.Fatalf("produce %d with the follower down: code %d", i, code)
		}
		h.ack(0, off, v)
	}
	c.waitFor("ISR to shrink to the leader", func() bool { return slices.Equal(c.current(0).ISR, []int32{1}) })
	before := fetchesServed(t, c, 1)
	c.start(2)
	c.waitFor("the follower back in the ISR", func() bool { return slices.Equal(c.current(0).ISR, both) })
	fetches := fetchesServed(t, c, 1) - before
	t.Logf("caught up ~300 KiB in %d Fetches", fetches)
	if fetches > 20 {
		t.Errorf("the follower needed %d Fetches to catch up ~300 KiB with 64 KiB answers allowed; want at most 20", fetches)
	}
	c.waitFor("replicas to settle", c.settled)
	c.check(h)
}
