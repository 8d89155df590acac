package interop

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestGroupToolsAgainstSluice runs other clients' group consumers against a
// sluice broker process: two kcat -G members, the Java console consumer
// without --partition, and ConsumerPerformance.
func TestGroupToolsAgainstSluice(t *testing.T) {
	s := kafka.StartSluice(t, "--config", groupBrokerConfig(t))
	t.Run("kcat", func(t *testing.T) { kcatGroup(t, s.Addr) })
	t.Run("console-consumer", func(t *testing.T) { javaConsoleGroup(t, s.Addr) })
	t.Run("consumer-performance", func(t *testing.T) { javaConsumerPerformance(t, s.Addr) })
}

// TestGroupToolsAgainstApacheKafka is the reference run of the same clients.
func TestGroupToolsAgainstApacheKafka(t *testing.T) {
	addr := kafka.SharedKafka(t).Addr
	t.Run("kcat", func(t *testing.T) { kcatGroup(t, addr) })
	t.Run("console-consumer", func(t *testing.T) { javaConsoleGroup(t, addr) })
	t.Run("consumer-performance", func(t *testing.T) { javaConsumerPerformance(t, addr) })
}

func kcatGroup(t *testing.T, addr string) {
	path, err := kafka.KcatPath()
	if err != nil {
		t.Fatal(err)
	}
	const partitions, per = 6, 40
	topic := newTopicName("kcat-group")
	group := topic + "-g"
	createTopic(t, addr, topic, partitions)
	c := newConsumed()
	var procs []*memberProc
	for i := 0; i < 2; i++ {
		cmd := exec.Command(path, "-b", addr, "-G", group, "-q", "-u", "-f", `%p %o %s\n`,
			"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", topic)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = testWriter{t, fmt.Sprintf("kcat %d: ", i)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m := &memberProc{cmd: cmd, done: make(chan struct{})}
		go func(idx int) {
			defer close(m.done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 3 {
					c.add(idx, f[2])
				}
			}
			_ = cmd.Wait()
		}(i)
		t.Cleanup(func() { m.stop(syscall.SIGKILL) })
		procs = append(procs, m)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	d := waitStable(t, adm, group, 2, 90*time.Second)
	for _, m := range d.Members {
		ca, ok := m.Assigned.AsConsumer()
		if !ok || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) == 0 {
			t.Fatalf("kcat member %s has no partitions: %+v", m.MemberID, ca)
		}
	}
	produceValues(t, addr, topic, "k", partitions, per)
	c.waitFor(t, "k-", partitions*per, 60*time.Second)
	c.checkOnce(t)
	c.mu.Lock()
	if c.byProc[0] == 0 || c.byProc[1] == 0 {
		t.Errorf("records per kcat: %v; both should have consumed", c.byProc)
	}
	c.mu.Unlock()
	for _, m := range procs {
		m.stop(syscall.SIGTERM)
	}
	waitState(t, adm, group, "Empty", 30*time.Second)
}

func javaConsoleGroup(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const partitions, per = 3, 20
	topic := newTopicName("java-group")
	createTopic(t, addr, topic, partitions)
	produceValues(t, addr, topic, "j", partitions, per)
	res, err := kafka.JavaTool(t, ctx, nil, kafka.ConsoleConsumerClass,
		"--bootstrap-server", addr, "--topic", topic, "--group", topic+"-g", "--from-beginning",
		"--max-messages", strconv.Itoa(partitions*per), "--timeout-ms", "60000")
	if err != nil {
		t.Fatalf("console consumer with a group: %v", err)
	}
	var want []string
	for p := 0; p < partitions; p++ {
		for i := 0; i < per; i++ {
			want = append(want, fmt.Sprintf("j-%d-%d", p, i))
		}
	}
	assertSameSet(t, strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n"), want)
	// The console consumer committed its position.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitCommitted(t, kadm.NewClient(cl), topic+"-g", topic, partitions, per)
}

func javaConsumerPerformance(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const partitions, per = 4, 2500
	topic := newTopicName("java-perf")
	createTopic(t, addr, topic, partitions)
	produceValues(t, addr, topic, "perf", partitions, per)
	res, err := kafka.JavaTool(t, ctx, nil, kafka.ConsumerPerformanceClass,
		"--bootstrap-server", addr, "--topic", topic, "--group", topic+"-g",
		"--messages", strconv.Itoa(partitions*per), "--timeout", "60000")
	if err != nil {
		t.Fatalf("ConsumerPerformance: %v\n%s", err, res.Stdout)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	fields := strings.Split(lines[len(lines)-1], ",")
	if len(fields) < 6 {
		t.Fatalf("ConsumerPerformance output not understood:\n%s", res.Stdout)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(fields[4])); err != nil || n != partitions*per {
		t.Fatalf("ConsumerPerformance consumed %q records, want %d:\n%s", fields[4], partitions*per, res.Stdout)
	}
}
