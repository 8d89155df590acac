package interop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The client failover tests run other clients' producers and consumers
// (kcat, Kafka 4.1's console producer and consumer) against three brokers
// while the leader of their RF3, min.insync.replicas=2 topic is killed with
// -9: every record the producer acknowledged is read back by the consumer
// once, and by a final read. The history (internal/history) holds the
// produces (ok when the producer exited having delivered everything: these
// tools do not say which record got which offset), each consumed record as
// a poll, and the final read.

// streamProc is a client process fed on stdin and read line by line.
type streamProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// startStream starts name args; each stdout line goes to onLine (from one
// goroutine).
func startStream(t *testing.T, onLine func(string), name string, args ...string) *streamProc {
	t.Helper()
	p := &streamProc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stderr = &lockedWriter{w: &p.stderr}
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			onLine(sc.Text())
		}
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *streamProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// wait closes stdin and waits up to d for the process to exit.
func (p *streamProc) wait(t *testing.T, d time.Duration, what string) error {
	t.Helper()
	_ = p.stdin.Close()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.kill()
		t.Fatalf("%s did not exit within %v; stderr:\n%s", what, d, tailOf(p.stderrText(), 4000))
		return nil
	}
}

func (p *streamProc) stderrText() string {
	lw := p.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return p.stderr.String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// javaArgs is the java command line of a Kafka tool's main class.
func javaArgs(t *testing.T, class string, args ...string) (string, []string) {
	t.Helper()
	cp, err := kafka.Classpath()
	if err != nil {
		t.Fatal(err)
	}
	java, err := kafka.JavaPath()
	if err != nil {
		t.Fatal(err)
	}
	log4j, err := kafka.Log4jConfig(t.TempDir(), "WARN")
	if err != nil {
		t.Fatal(err)
	}
	full := append(append([]string{}, kafka.JVMTestOpts...), "-Dlog4j2.configurationFile="+log4j, "-cp", cp, class)
	return java, append(full, args...)
}

// consumedLog collects what one consumer process read, as polls.
type consumedLog struct {
	h    *clusterHistory
	proc int
	mu   sync.Mutex
	seen map[string]int
}

func newConsumedLog(h *clusterHistory) *consumedLog {
	return &consumedLog{h: h, proc: h.process(), seen: map[string]int{}}
}

func (c *consumedLog) add(topic string, partition int32, offset int64, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.h.rec.Invoke(c.proc, history.Poll)
	p.Complete(history.Op{Outcome: history.OK, Records: []history.Record{{Topic: topic, Partition: partition, Offset: offset, Value: value}}})
	c.seen[value]++
}

func (c *consumedLog) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// failoverRun drives one producer and one consumer tool through a leader
// kill: records written one by one to the producer's stdin, half before
// the consumer has read some, then the kill amid the second half.
type failoverRun struct {
	t        *testing.T
	c        *brokerCluster
	h        *clusterHistory
	topic    string
	prefix   string
	n        int
	producer func(bootstrap string) *streamProc
	consumer func(bootstrap string, log *consumedLog) *streamProc
	// deliveryFailed reports a producer's own account of a failed send.
	deliveryFailed func(stderr string) bool
}

func (r *failoverRun) run() {
	t, c, h := r.t, r.c, r.h
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	two := "2"
	resp, err := kadm.NewClient(c.client()).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &two}, r.topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", r.topic, err, resp.Err)
	}
	before := c.waitLeaders(r.topic, 1, c.ids()...)[0]
	bootstrap := strings.Join(c.bootstrap(), ",")
	consumed := newConsumedLog(h)
	cons := r.consumer(bootstrap, consumed)
	prod := r.producer(bootstrap)
	var pending []history.Pending
	write := func(from, to int) {
		for i := from; i < to; i++ {
			v := fmt.Sprintf("%s-%05d", r.prefix, i)
			pending = append(pending, h.rec.Invoke(h.process(), history.Produce))
			if _, err := io.WriteString(prod.stdin, v+"\n"); err != nil {
				t.Fatalf("write to the producer: %v; stderr:\n%s", err, tailOf(prod.stderrText(), 4000))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	half := r.n / 2
	write(0, half)
	eventually(t, 30*time.Second, "the consumer reads records before the kill", func() error {
		if got := consumed.count(); got < half/2 {
			return fmt.Errorf("%d read; producer stderr: %s; consumer stderr: %s", got, tailOf(prod.stderrText(), 500), tailOf(cons.stderrText(), 500))
		}
		return nil
	})
	// The kill lands while the producer is sending: the records written
	// just before it are in flight.
	write(half, half+30)
	c.brokers[before.Leader].Kill()
	t.Logf("killed the leader %d (epoch %d) after %d records written, %d read", before.Leader, before.Epoch, half+30, consumed.count())
	write(half+30, r.n)
	perr := prod.wait(t, 40*time.Second, "the producer")
	stderr := prod.stderrText()
	delivered := perr == nil && !r.deliveryFailed(stderr)
	for i, p := range pending {
		op := history.Op{Outcome: history.OK, Topic: r.topic, Partition: 0, Offset: -1, Value: fmt.Sprintf("%s-%05d", r.prefix, i)}
		if !delivered {
			op.Outcome, op.Partition, op.Offset, op.Error = history.Unknown, -1, -1, "the producer reported a failed delivery"
		}
		p.Complete(op)
	}
	if !delivered {
		t.Errorf("the producer did not deliver every record through the failover (exit %v):\n%s", perr, tailOf(stderr, 4000))
	}
	var live []int32
	for _, id := range c.ids() {
		if id != before.Leader {
			live = append(live, id)
		}
	}
	after := c.waitLeaders(r.topic, 1, live...)[0]
	eventually(t, 30*time.Second, "the consumer reads every record", func() error {
		if got := consumed.count(); got < r.n {
			return fmt.Errorf("%d of %d read; consumer stderr: %s", got, r.n, tailOf(cons.stderrText(), 1000))
		}
		return nil
	})
	cons.kill()
	records := h.finalRead(c, r.topic, live...)
	stats := h.check()
	consumed.mu.Lock()
	defer consumed.mu.Unlock()
	for v, k := range consumed.seen {
		if k != 1 {
			t.Errorf("the consumer read %s %d times", v, k)
		}
	}
	if records != r.n {
		t.Errorf("the final read holds %d records, %d were produced once each", records, r.n)
	}
	t.Logf("leader %d -> %d (epoch %d -> %d); %d produced and acknowledged, %d consumed once each, final read %d; history %+v",
		before.Leader, after.Leader, before.Epoch, after.Epoch, r.n, len(consumed.seen), records, stats)
}

// TestClusterKcatThroughLeaderKill: kcat -P (idempotent, acks=all) and
// kcat -C through a leader kill.
func TestClusterKcatThroughLeaderKill(t *testing.T) {
	kcat, err := kafka.KcatPath()
	if err != nil {
		t.Fatal(err)
	}
	c := startBrokerCluster(t, 3)
	topic := newTopicName("kcat-failover")
	r := &failoverRun{t: t, c: c, h: newClusterHistory(t), topic: topic, prefix: "kcat", n: 400,
		producer: func(b string) *streamProc {
			return startStream(t, func(string) {}, kcat, "-P", "-b", b, "-t", topic, "-p", "0",
				"-X", "enable.idempotence=true", "-X", "acks=all", "-X", "message.timeout.ms=30000",
				"-X", "linger.ms=5", "-X", "retry.backoff.ms=100", "-X", "reconnect.backoff.max.ms=500")
		},
		consumer: func(b string, log *consumedLog) *streamProc {
			return startStream(t, func(line string) {
				f := strings.SplitN(line, " ", 3)
				if len(f) != 3 {
					return
				}
				p, _ := strconv.Atoi(f[0])
				o, _ := strconv.ParseInt(f[1], 10, 64)
				log.add(topic, int32(p), o, f[2])
			}, kcat, "-C", "-b", b, "-t", topic, "-o", "beginning", "-u", "-f", `%p %o %s\n`,
				"-X", "reconnect.backoff.max.ms=500", "-X", "topic.metadata.refresh.interval.ms=1000")
		},
		// kcat prints a failed delivery report as "Delivery failed".
		deliveryFailed: func(stderr string) bool { return strings.Contains(stderr, "Delivery failed") },
	}
	r.run()
}

// TestClusterJavaConsoleThroughLeaderKill: Kafka 4.1's console producer
// (idempotent, acks=all) and console consumer through a leader kill.
func TestClusterJavaConsoleThroughLeaderKill(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("java-failover")
	r := &failoverRun{t: t, c: c, h: newClusterHistory(t), topic: topic, prefix: "java", n: 400,
		producer: func(b string) *streamProc {
			java, args := javaArgs(t, kafka.ConsoleProducerClass, "--bootstrap-server", b, "--topic", topic,
				"--producer-property", "acks=all", "--producer-property", "enable.idempotence=true",
				"--producer-property", "delivery.timeout.ms=30000", "--producer-property", "request.timeout.ms=5000",
				"--producer-property", "linger.ms=5", "--producer-property", "reconnect.backoff.max.ms=500")
			return startStream(t, func(string) {}, java, args...)
		},
		consumer: func(b string, log *consumedLog) *streamProc {
			java, args := javaArgs(t, kafka.ConsoleConsumerClass, "--bootstrap-server", b, "--topic", topic,
				"--from-beginning", "--property", "print.partition=true", "--property", "print.offset=true",
				"--consumer-property", "reconnect.backoff.max.ms=500", "--consumer-property", "metadata.max.age.ms=2000")
			return startStream(t, func(line string) {
				// Partition:0\tOffset:12\tvalue
				f := strings.Split(line, "\t")
				if len(f) != 3 || !strings.HasPrefix(f[0], "Partition:") || !strings.HasPrefix(f[1], "Offset:") {
					return
				}
				p, _ := strconv.Atoi(strings.TrimPrefix(f[0], "Partition:"))
				o, _ := strconv.ParseInt(strings.TrimPrefix(f[1], "Offset:"), 10, 64)
				log.add(topic, int32(p), o, f[2])
			}, java, args...)
		},
		// The console producer logs each failed send.
		deliveryFailed: func(stderr string) bool { return strings.Contains(stderr, "Error when sending message") },
	}
	r.run()
}
