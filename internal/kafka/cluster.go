package kafka

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// ClusterStatus writes the cluster's brokers and controller, then its
// under-replicated partitions (ISR smaller than the replicas) and offline
// partitions (no live leader), from Metadata — so it works against sluice
// and Apache Kafka alike.
func (a *Admin) ClusterStatus(ctx context.Context, w io.Writer) error {
	m, err := a.adm.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("kafka: cluster status: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "cluster %s\tcontroller %d\tbrokers %d\n", m.Cluster, m.Controller, len(m.Brokers))
	fmt.Fprintln(tw, "  broker\taddress\track")
	for _, b := range m.Brokers {
		rack := "-"
		if b.Rack != nil && *b.Rack != "" {
			rack = *b.Rack
		}
		fmt.Fprintf(tw, "  %d\t%s:%d\t%s\n", b.NodeID, b.Host, b.Port, rack)
	}
	var under, offline []string
	total := 0
	names := m.Topics.Names()
	sort.Strings(names)
	for _, name := range names {
		for _, p := range m.Topics[name].Partitions.Sorted() {
			total++
			line := fmt.Sprintf("  %s-%d\t%d\t%v\t%v\t%v\n", name, p.Partition, p.Leader, p.Replicas, p.ISR, p.OfflineReplicas)
			switch {
			case p.Leader < 0:
				offline = append(offline, line)
			case len(p.ISR) < len(p.Replicas):
				under = append(under, line)
			}
		}
	}
	fmt.Fprintf(tw, "partitions %d\tunder-replicated %d\toffline %d\n", total, len(under), len(offline))
	for _, section := range []struct {
		name  string
		lines []string
	}{{"under-replicated", under}, {"offline", offline}} {
		if len(section.lines) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s:\n  partition\tleader\treplicas\tisr\toffline\n", section.name)
		for _, l := range section.lines {
			fmt.Fprint(tw, l)
		}
	}
	return tw.Flush()
}
