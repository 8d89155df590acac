package schemaregistry

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestOnApacheKafka stores the registry in a real Apache Kafka 4.1 broker:
// the topic is created compacted with one partition, two instances serve
// the same ids, and a restarted instance reads them back.
func TestOnApacheKafka(t *testing.T) {
	k := kafka.SharedKafka(t)
	opts := Options{Bootstrap: []string{k.Addr}, Topic: "_schemas_" + t.Name()}
	first := startRegistryWith(t, opts)
	ids, subjects := fillRegistry(t, first)
	second := startRegistryWith(t, opts)
	want := takeSnapshot(t, first, ids, subjects)
	if got := takeSnapshot(t, second, ids, subjects); !reflect.DeepEqual(got, want) {
		t.Fatalf("second instance on Kafka:\n%+v\nfirst:\n%+v", got, want)
	}
	first.close()
	second.close()
	third := startRegistryWith(t, opts)
	if got := takeSnapshot(t, third, ids, subjects); !reflect.DeepEqual(got, want) {
		t.Fatalf("restarted instance on Kafka:\n%+v\nbefore:\n%+v", got, want)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testContext(t)
	configs, err := adm.DescribeTopicConfigs(ctx, opts.Topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := configs.On(opts.Topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	policy := ""
	for _, kv := range c.Configs {
		if kv.Key == "cleanup.policy" && kv.Value != nil {
			policy = *kv.Value
		}
	}
	topics, err := adm.ListTopics(ctx, opts.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if policy != "compact" || len(topics[opts.Topic].Partitions) != 1 {
		t.Fatalf("topic %s: cleanup.policy %q, %d partitions; want compact, 1", opts.Topic, policy, len(topics[opts.Topic].Partitions))
	}
}
