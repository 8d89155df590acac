package config

import (
	"errors"
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
