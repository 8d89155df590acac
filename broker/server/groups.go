package server

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/group"
)

// groupTick is how often the group coordinator looks at the clock (join
// phases that timed out, expired sessions, offset expiry). Decisions use
// Options.Clock; only the polling runs on the wall clock.
const groupTick = 100 * time.Millisecond

// openGroups builds the group coordinator from the broker's group.* and
// offsets.* properties and replays __consumer_offsets.
func openGroups(opts Options, cfg config.Broker, reg *registry, m *metrics) (*group.Coordinator, error) {
	gc, err := cfg.Group()
	if err != nil {
		return nil, err
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	delay := ms(gc.InitialRebalanceDelayMs)
	if delay == 0 {
		delay = -1 // group.Options: negative = no delay
	}
	c, err := group.New(group.Options{
		Storage: offsetsStorage{reg: reg, partitions: int32(gc.OffsetsTopicNumPartitions)},
		Clock:   opts.Clock, Logger: opts.Logger.With("component", "group-coordinator"),
		OffsetsPartitions:      int32(gc.OffsetsTopicNumPartitions),
		MinSessionTimeout:      ms(gc.MinSessionTimeoutMs),
		MaxSessionTimeout:      ms(gc.MaxSessionTimeoutMs),
		InitialRebalanceDelay:  delay,
		OffsetsRetention:       time.Duration(gc.OffsetsRetentionMinutes) * time.Minute,
		OffsetsRetentionCheck:  ms(gc.OffsetsRetentionCheckIntervalMs),
		MaxGroupSize:           int(gc.MaxSize),
		OffsetMetadataMaxBytes: int(gc.OffsetMetadataMaxBytes),
		MaxGroupMetadataBytes:  gc.MaxMetadataBytes,
		MaxCoordinatorBytes:    gc.CoordinatorMaxBytes,
		Clustered:              opts.Cluster != nil,
	})
	if err != nil {
		return nil, fmt.Errorf("server: load consumer groups: %w", err)
	}
	m.reg.MustRegister(groupCollector{c})
	return c, nil
}

// groupLoop drives the group coordinator's clock until Shutdown.
func (s *Server) groupLoop() { s.runEvery(groupTick, s.groups.Tick) }

// runEvery calls fn every period until Shutdown; it is one of the
// goroutines counted by retentionWG.
func (s *Server) runEvery(period time.Duration, fn func()) {
	defer s.retentionWG.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// partitionsOnce de-duplicates the partitions a request names.
type partitionsOnce map[string]map[int32]bool

// first reports whether (topic, partition) is seen for the first time.
func (po partitionsOnce) first(topic string, p int32) bool {
	if po[topic] == nil {
		po[topic] = map[int32]bool{}
	}
	if po[topic][p] {
		return false
	}
	po[topic][p] = true
	return true
}

// producerIDExpiration is the broker's producer.id.expiration.ms (its
// default when the property is malformed; New rejects that earlier).
func producerIDExpiration(b config.Broker) time.Duration {
	gc, err := b.Group()
	if err != nil {
		gc = config.DefaultGroup()
	}
	return time.Duration(gc.ProducerIDExpirationMs) * time.Millisecond
}

// groupCollector exports the coordinator's counts to Prometheus.
type groupCollector struct{ c *group.Coordinator }

var (
	groupsDesc      = prometheus.NewDesc("sluice_group_groups", "Consumer groups per state.", []string{"state"}, nil)
	membersDesc     = prometheus.NewDesc("sluice_group_members", "Members of all consumer groups.", nil, nil)
	generationsDesc = prometheus.NewDesc("sluice_group_generations_total", "Group generations formed (completed rebalances) since start.", nil, nil)
	commitsDesc     = prometheus.NewDesc("sluice_group_offset_commits_total", "Partition offsets committed since start.", nil, nil)
	bytesDesc       = prometheus.NewDesc("sluice_group_bytes", "Bytes all consumer groups hold (members, offsets, ids), bounded by group.coordinator.max.bytes.", nil, nil)
	visitsDesc      = prometheus.NewDesc("sluice_group_tick_visits_total", "Groups the coordinator's clock looked at because a deadline or an offset expiry was due.", nil, nil)
)

func (gc groupCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupsDesc
	ch <- membersDesc
	ch <- generationsDesc
	ch <- commitsDesc
	ch <- bytesDesc
	ch <- visitsDesc
}

func (gc groupCollector) Collect(ch chan<- prometheus.Metric) {
	st := gc.c.Stats()
	for _, s := range []group.State{group.StateEmpty, group.StatePreparingRebalance, group.StateCompletingRebalance, group.StateStable} {
		ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(st.Groups[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(st.Members))
	ch <- prometheus.MustNewConstMetric(generationsDesc, prometheus.CounterValue, float64(st.Generations))
	ch <- prometheus.MustNewConstMetric(commitsDesc, prometheus.CounterValue, float64(st.Commits))
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(visitsDesc, prometheus.CounterValue, float64(st.TickVisits))
}
