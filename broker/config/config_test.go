package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestDefaultsAreKafkas(t *testing.T) {
	b := Default()
	if b.NumPartitions != 1 || !b.AutoCreateTopics || b.TopicDefaults.SegmentBytes != 1<<30 ||
		b.TopicDefaults.RetentionMs != 7*24*3600*1000 || b.TopicDefaults.MaxMessageBytes != 1048588 ||
		b.SocketRequestMaxBytes != 104857600 {
		t.Fatalf("defaults differ from Kafka's: %+v", b)
	}
}

func TestParseProperties(t *testing.T) {
	src := []byte(`# a comment
! another
num.partitions=3
auto.create.topics.enable: false
log.retention.hours = 1
log.retention.minutes=30
log.segment.bytes 1048576
message.max.bytes=\
  2000000
broker.id=7
listeners=PLAINTEXT://127.0.0.1:19092,SSL://x:1
some.unknown.key=x
`)
	b, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if b.NumPartitions != 3 || b.AutoCreateTopics || b.TopicDefaults.SegmentBytes != 1<<20 ||
		b.TopicDefaults.MaxMessageBytes != 2000000 || b.NodeID != 7 || b.Listener != "127.0.0.1:19092" {
		t.Fatalf("parsed %+v", b)
	}
	if b.TopicDefaults.RetentionMs != 30*60*1000 {
		t.Fatalf("retention: minutes must win over hours, got %d", b.TopicDefaults.RetentionMs)
	}
	if u := b.Unknown(); len(u) != 1 || u[0] != "some.unknown.key" {
		t.Fatalf("unknown = %v", u)
	}
}

func TestBadValues(t *testing.T) {
	for _, src := range []string{"num.partitions=0", "num.partitions=x", "auto.create.topics.enable=maybe",
		"log.message.timestamp.type=Now", "socket.request.max.bytes=-5", "log.cleanup.policy=keep"} {
		if _, err := Parse([]byte(src)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", src, err)
		}
	}
}

func TestTopicOverrides(t *testing.T) {
	b := Default()
	s := func(v string) *string { return &v }
	if err := ValidateTopicConfigs(map[string]*string{"retention.ms": s("1000"), "cleanup.policy": s("compact")}); err != nil {
		t.Fatal(err)
	}
	if err := ValidateTopicConfigs(map[string]*string{"no.such": s("1")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown key accepted: %v", err)
	}
	if err := ValidateTopicConfigs(map[string]*string{"retention.ms": s("soon")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad value accepted: %v", err)
	}
	tc := b.ResolveTopic(map[string]string{"retention.ms": "1000"})
	if tc.RetentionMs != 1000 || tc.SegmentBytes != 1<<30 {
		t.Fatalf("resolved %+v", tc)
	}
	for _, e := range b.TopicEntries(map[string]string{"retention.ms": "1000"}) {
		if e.Name == "retention.ms" && (e.Source != 1 || e.Value != "1000") {
			t.Fatalf("entry %+v", e)
		}
		if e.Name == "segment.bytes" && (!e.IsDefault || e.Source != 5 || e.Type != typeInt) {
			t.Fatalf("entry %+v", e)
		}
	}
}

// TestRetentionValuesAsKafka: the retention limits accept and refuse what
// Apache Kafka does (LogConfig, KafkaConfig), and keep 0 as 0.
func TestRetentionValuesAsKafka(t *testing.T) {
	for _, c := range []struct {
		src       string
		ok        bool
		ms, bytes int64
	}{
		{"log.retention.bytes=0", true, 168 * 3600 * 1000, 0},
		{"log.retention.bytes=-7", true, 168 * 3600 * 1000, -7},
		{"log.retention.ms=-5", true, -1, -1},
		{"log.retention.ms=1", true, 1, -1},
		{"log.retention.ms=0", false, 0, 0},
		{"log.retention.minutes=0", false, 0, 0},
		{"log.retention.hours=0", false, 0, 0},
		{"log.retention.hours=0\nlog.retention.ms=5", true, 5, -1},
	} {
		b, err := Parse([]byte(c.src))
		if !c.ok {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: accepted (%v), Kafka refuses it", c.src, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if b.TopicDefaults.RetentionMs != c.ms || b.TopicDefaults.RetentionBytes != c.bytes {
			t.Errorf("%q: retention ms %d bytes %d, want %d %d", c.src, b.TopicDefaults.RetentionMs, b.TopicDefaults.RetentionBytes, c.ms, c.bytes)
		}
	}
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		key, value string
		ok         bool
	}{
		{"retention.bytes", "0", true},
		{"retention.bytes", "-9", true},
		{"retention.ms", "0", true},
		{"retention.ms", "-1", true},
		{"retention.ms", "-2", false},
	} {
		err := ValidateTopicConfigs(map[string]*string{c.key: s(c.value)})
		if (err == nil) != c.ok {
			t.Errorf("topic %s=%s: err %v, want ok=%v", c.key, c.value, err, c.ok)
		}
		if c.ok {
			tc := Default().ResolveTopic(map[string]string{c.key: c.value})
			got := tc.RetentionBytes
			if c.key == "retention.ms" {
				got = tc.RetentionMs
			}
			if strconv.FormatInt(got, 10) != c.value {
				t.Errorf("topic %s=%s resolved to %d", c.key, c.value, got)
			}
		}
	}
}

func TestGroupBoundProperties(t *testing.T) {
	d := DefaultGroup()
	if d.MaxMetadataBytes != 4<<20 || d.CoordinatorMaxBytes != 256<<20 || d.MaxSize != 10000 {
		t.Fatalf("defaults: %+v", d)
	}
	b, err := FromProperties(map[string]string{"group.max.metadata.bytes": "1048576", "group.coordinator.max.bytes": "67108864"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.Group()
	if err != nil || g.MaxMetadataBytes != 1<<20 || g.CoordinatorMaxBytes != 64<<20 {
		t.Fatalf("Group() = %+v, %v", g, err)
	}
	for _, key := range []string{"group.max.metadata.bytes", "group.coordinator.max.bytes"} {
		if !IsGroupProperty(key) {
			t.Errorf("%s is not a group property", key)
		}
		b, err := FromProperties(map[string]string{key: "0"})
		if err == nil {
			_, err = b.Group()
		}
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=0: error %v, want one naming the key", key, err)
		}
	}
}
