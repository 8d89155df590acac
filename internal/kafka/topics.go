package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Admin wraps a kadm client for the topics commands.
type Admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// NewAdmin connects lazily to the bootstrap brokers with sec's security.
func NewAdmin(bootstrap string, sec Security) (*Admin, error) {
	opts, err := ClientOptions(bootstrap, sec)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	return &Admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close releases the connections.
func (a *Admin) Close() { a.cl.Close() }

// TopicSpec is what "topics create" asks for.
type TopicSpec struct {
	// Name of the topic.
	Name string
	// Partitions; -1 asks for the broker's default.
	Partitions int32
	// ReplicationFactor; -1 asks for the broker's default.
	ReplicationFactor int16
	// Configs are topic configs such as retention.ms, in Kafka's names.
	Configs map[string]string
}

// ParseConfigs turns ["k=v", ...] into a map, rejecting entries without '='.
func ParseConfigs(kvs []string) (map[string]string, error) {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, badInput("config %q is not key=value", kv)
		}
		m[strings.TrimSpace(k)] = v
	}
	return m, nil
}

// CreateTopic creates one topic and writes a one-line confirmation to w.
func (a *Admin) CreateTopic(ctx context.Context, spec TopicSpec, w io.Writer) error {
	if spec.Name == "" {
		return badInput("topic name is empty")
	}
	if spec.Partitions == 0 || spec.Partitions < -1 {
		return badInput("partitions must be positive (or -1 for the broker default), got %d", spec.Partitions)
	}
	if spec.ReplicationFactor == 0 || spec.ReplicationFactor < -1 {
		return badInput("replication factor must be positive (or -1 for the broker default), got %d", spec.ReplicationFactor)
	}
	configs := make(map[string]*string, len(spec.Configs))
	for k, v := range spec.Configs {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := a.adm.CreateTopic(ctx, spec.Partitions, spec.ReplicationFactor, configs, spec.Name)
	if err != nil {
		return fmt.Errorf("kafka: create topic %q: %w%s", spec.Name, err, errMessage(resp.ErrMessage))
	}
	_, err = fmt.Fprintf(w, "created topic %s with %d partitions, replication factor %d\n", resp.Topic, resp.NumPartitions, resp.ReplicationFactor)
	return err
}

func errMessage(m string) string {
	if m == "" {
		return ""
	}
	return " (" + m + ")"
}

// ListTopics writes one topic name per line, sorted; internal topics only when asked.
func (a *Admin) ListTopics(ctx context.Context, internal bool, w io.Writer) error {
	var (
		details kadm.TopicDetails
		err     error
	)
	if internal {
		details, err = a.adm.ListTopicsWithInternal(ctx)
	} else {
		details, err = a.adm.ListTopics(ctx)
	}
	if err != nil {
		return fmt.Errorf("kafka: list topics: %w", err)
	}
	for _, name := range details.Names() {
		if _, err := fmt.Fprintln(w, name); err != nil {
			return err
		}
	}
	return nil
}

// DescribeTopics writes partitions (leader, replicas, ISR, start and end
// offsets) and non-default configs of each topic.
func (a *Admin) DescribeTopics(ctx context.Context, topics []string, w io.Writer) error {
	details, err := a.adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: describe topics: %w", err)
	}
	names := details.Names()
	if len(topics) > 0 {
		names = topics
	}
	var errs []error
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, name := range names {
		d, ok := details[name]
		if !ok || d.Err != nil {
			reason := "not returned by the broker"
			if ok {
				reason = d.Err.Error()
			}
			errs = append(errs, fmt.Errorf("kafka: topic %q: %s", name, reason))
			continue
		}
		starts, _ := a.adm.ListStartOffsets(ctx, name)
		ends, _ := a.adm.ListEndOffsets(ctx, name)
		fmt.Fprintf(tw, "topic %s\tpartitions %d\treplication factor %d\tid %s\n", name, len(d.Partitions), d.Partitions.NumReplicas(), d.ID)
		fmt.Fprintln(tw, "  partition\tleader\tepoch\treplicas\tisr\toffline\tstart\tend")
		for _, p := range d.Partitions.Sorted() {
			start, end := int64(-1), int64(-1)
			if o, ok := starts.Lookup(name, p.Partition); ok {
				start = o.Offset
			}
			if o, ok := ends.Lookup(name, p.Partition); ok {
				end = o.Offset
			}
			fmt.Fprintf(tw, "  %d\t%d\t%d\t%v\t%v\t%v\t%d\t%d\n", p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas, start, end)
		}
		if rcs, err := a.adm.DescribeTopicConfigs(ctx, name); err == nil {
			for _, rc := range rcs {
				var lines []string
				for _, c := range rc.Configs {
					if c.Source.String() == "DEFAULT_CONFIG" || c.Value == nil {
						continue
					}
					lines = append(lines, fmt.Sprintf("  config\t%s=%s\n", c.Key, *c.Value))
				}
				sort.Strings(lines)
				for _, l := range lines {
					fmt.Fprint(tw, l)
				}
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// DeleteTopics deletes the named topics and reports each on its own line.
func (a *Admin) DeleteTopics(ctx context.Context, topics []string, w io.Writer) error {
	if len(topics) == 0 {
		return badInput("name at least one topic to delete")
	}
	resps, err := a.adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: delete topics: %w", err)
	}
	var errs []error
	for _, t := range topics {
		r, ok := resps[t]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("kafka: delete topic %q: not in the broker's answer", t))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("kafka: delete topic %q: %w%s", t, r.Err, errMessage(r.ErrMessage)))
		default:
			fmt.Fprintf(w, "deleted topic %s\n", t)
		}
	}
	return errors.Join(errs...)
}

// DeleteRecords deletes the records of topic's partition below before
// (DeleteRecords: the partition's log start offset moves up to before;
// -1 means the high watermark) and reports the new log start offset.
func (a *Admin) DeleteRecords(ctx context.Context, topic string, partition int32, before int64, w io.Writer) error {
	if topic == "" {
		return badInput("name the topic")
	}
	if partition < 0 {
		return badInput("--partition must be >= 0, got %d", partition)
	}
	if before < -1 {
		return badInput("--before must be an offset >= 0 (or -1: the high watermark), got %d", before)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: partition, At: before})
	resps, err := a.adm.DeleteRecords(ctx, os)
	if err != nil {
		return fmt.Errorf("kafka: delete records of %s[%d]: %w", topic, partition, err)
	}
	r, ok := resps.Lookup(topic, partition)
	switch {
	case !ok:
		return fmt.Errorf("kafka: delete records of %s[%d]: not in the broker's answer", topic, partition)
	case r.Err != nil:
		return fmt.Errorf("kafka: delete records of %s[%d] before %d: %w", topic, partition, before, r.Err)
	}
	_, err = fmt.Fprintf(w, "deleted records of %s[%d]: log start offset now %d\n", topic, partition, r.LowWatermark)
	return err
}
