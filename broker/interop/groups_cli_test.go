package interop

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestGroupsCLIAgainstSluice drives consume --group and the groups
// commands against a sluice process.
func TestGroupsCLIAgainstSluice(t *testing.T) {
	s := kafka.StartSluice(t, "--config", groupBrokerConfig(t))
	groupsCLI(t, s.Addr)
}

// TestGroupsCLIAgainstApacheKafka is the reference run.
func TestGroupsCLIAgainstApacheKafka(t *testing.T) {
	groupsCLI(t, kafka.SharedKafka(t).Addr)
}

// describeCommitted parses "groups describe" output into partition ->
// (committed, lag) for topic.
func describeCommitted(t *testing.T, out, topic string) map[int32][2]int64 {
	t.Helper()
	got := map[int32][2]int64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != topic {
			continue
		}
		p, _ := strconv.Atoi(f[1])
		num := func(s string) int64 {
			if s == "-" {
				return -1
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("describe line %q: %q is not a number", line, s)
			}
			return n
		}
		c, l := num(f[2]), num(f[4])
		got[int32(p)] = [2]int64{c, l}
	}
	return got
}

func groupsCLI(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := "--bootstrap=" + addr
	topic := newTopicName("cli-groups")
	group := topic + "-g"
	createTopic(t, addr, topic, 2)
	var in strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&in, "line %02d\n", i)
	}
	mustCLI(t, ctx, in.String(), "produce", b, "--topic", topic, "--partition", "0", "-q")
	if out := mustCLI(t, ctx, "", "consume", b, "--topic", topic, "--group", group, "--max", "10", "-q"); strings.Count(out, "\n") != 10 {
		t.Fatalf("consume --group --max 10 printed:\n%s", out)
	}
	if out := mustCLI(t, ctx, "", "groups", "list", b); !strings.Contains(out, group) || !strings.Contains(out, "Empty") {
		t.Fatalf("groups list:\n%s", out)
	}
	expect := func(what string, want map[int32][2]int64) {
		t.Helper()
		out := mustCLI(t, ctx, "", "groups", "describe", b, group)
		got := describeCommitted(t, out, topic)
		for p, w := range want {
			if got[p] != w {
				t.Fatalf("%s: partition %d committed/lag %v, want %v:\n%s", what, p, got[p], w, out)
			}
		}
	}
	expect("after consuming 10", map[int32][2]int64{0: {10, 20}})
	for _, c := range []struct {
		flags []string
		want  int64
	}{
		{[]string{"--to-earliest"}, 0},
		{[]string{"--to-offset", "7"}, 7},
		{[]string{"--to-offset", "99"}, 30}, // clamped to the log end
		{[]string{"--to-datetime", "2001-01-01T00:00:00Z"}, 0},
		{[]string{"--to-latest"}, 30},
	} {
		mustCLI(t, ctx, "", append([]string{"groups", "reset-offsets", b, group, "--topic", topic}, c.flags...)...)
		expect(strings.Join(c.flags, " "), map[int32][2]int64{0: {c.want, 30 - c.want}})
	}
	mustCLI(t, ctx, "", "groups", "reset-offsets", b, group, "--to-offset", "25")
	if out := mustCLI(t, ctx, "", "consume", b, "--topic", topic, "--group", group, "-e", "-q"); out != "line 25\nline 26\nline 27\nline 28\nline 29\n" {
		t.Fatalf("consume after a reset to 25 printed:\n%s", out)
	}
	if _, errOut, err := sluiceCLI(t, ctx, "", "groups", "reset-offsets", b, group, "--to-earliest", "--to-latest"); err == nil {
		t.Fatalf("two targets must fail; stderr %q", errOut)
	}

	// A group with a live member is not reset.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pctx.Err() == nil {
			cl.PollFetches(pctx)
		}
	}()
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	waitStable(t, kadm.NewClient(adm), group, 1, 60*time.Second)
	out := mustCLI(t, ctx, "", "groups", "describe", b, group)
	if !strings.Contains(out, "Stable") || !strings.Contains(out, topic+"[0 1]") {
		t.Fatalf("describe of a live group shows no member with its partitions:\n%s", out)
	}
	if _, errOut, err := sluiceCLI(t, ctx, "", "groups", "reset-offsets", b, group, "--to-earliest"); err == nil || !strings.Contains(errOut, "active members") {
		t.Fatalf("reset of a live group: err %v, stderr %q", err, errOut)
	}
	stop()
	<-done
	cl.Close()
	waitState(t, kadm.NewClient(adm), group, "Empty", 30*time.Second)
	if out := mustCLI(t, ctx, "", "groups", "delete", b, group); !strings.Contains(out, "deleted group "+group) {
		t.Fatalf("groups delete:\n%s", out)
	}
	if out := mustCLI(t, ctx, "", "groups", "list", b); strings.Contains(out, group) {
		t.Fatalf("deleted group still listed:\n%s", out)
	}
}
