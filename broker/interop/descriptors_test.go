package interop

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestSluiceSurvivesDescriptorExhaustion lowers a running `sluice broker`'s
// RLIMIT_NOFILE to 64 (prlimit) and opens hundreds of connections to its
// Kafka port and its metrics port. accept(2) then fails with EMFILE: the
// broker used to return from its accept loop and exit. It must back off,
// keep serving, and serve normally once the connections are gone.
func TestSluiceSurvivesDescriptorExhaustion(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) is needed to lower the broker's descriptor limit: %v", err)
	}
	port, err := kafka.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(port)
	s := kafka.StartSluice(t, "--metrics-listen", metricsAddr)
	topic := newTopicName("fds")
	createTopic(t, s.Addr, topic, 1)
	if out, err := exec.Command(prlimit, "--pid", strconv.Itoa(s.PID()), "--nofile=64:64").CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v\n%s", err, out)
	}

	var storm []net.Conn
	defer func() {
		for _, c := range storm {
			c.Close()
		}
	}()
	for i := 0; i < 300; i++ {
		addr := s.Addr
		if i%3 == 2 {
			addr = metricsAddr
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		storm = append(storm, c)
	}
	// The broker is out of descriptors: accepts fail until connections go.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.Output(), "accept failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no accept failure logged with 300 connections and 64 descriptors:\n%s", tail(s.Output()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range storm {
		c.Close()
	}
	storm = nil

	// Serving as before: produce, consume, metrics.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint("after the storm ", i))}).FirstErr(); err != nil {
			t.Fatalf("produce after the storm: %v\n%s", err, tail(s.Output()))
		}
	}
	if got := consumeAll(t, s.Addr, topic, 1, 10); string(got[9].Value) != "after the storm 9" {
		t.Fatalf("consumed %q", got[9].Value)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics after the storm: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "sluice_broker_accept_errors_total") || strings.Contains(string(body), "sluice_broker_accept_errors_total 0\n") {
		t.Fatalf("accept errors not counted in /metrics")
	}
}

func tail(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}
