package server

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/internal/audit"
)

// The broker audit tier (audit.enable): the partition leader's appends,
// counted in produceOne / produceReplicated and at the transaction markers
// (txnMarkers.WriteMarker), published to _audit through a client of the
// broker's first listener (audit.Broker has what it guarantees).

// newBrokerAudit returns the broker tier of cfg (nil: audit.enable off).
func newBrokerAudit(cfg config.Broker, specs []*listener) (*audit.Broker, error) {
	if !cfg.AuditEnable {
		return nil, nil
	}
	if p := specs[0].protocol; p != config.Plaintext {
		return nil, fmt.Errorf("server: audit.enable: the broker publishes its counts to %s through its first listener %s, which is %s; it must be PLAINTEXT", audit.Topic, specs[0].name, p)
	}
	b, err := audit.NewBroker(cfg.NodeID, time.Duration(cfg.AuditWindowMs)*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("server: audit.window.ms: %w", err)
	}
	return b, nil
}

// startAuditReporter starts publishing the broker tier through addr (the
// first listener's bound address), once.
func (s *Server) startAuditReporter(addr net.Addr) {
	if s.audit == nil {
		return
	}
	s.auditOnce.Do(func() {
		host, port, _ := net.SplitHostPort(addr.String())
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		interval := time.Duration(s.cfg.AuditPublishIntervalMs) * time.Millisecond
		rep, err := audit.StartBrokerReporter(s.audit, []kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(host, port))}, interval,
			s.logger.With("component", "audit"))
		if err != nil {
			s.logger.Error("audit: cannot publish the broker tier", "err", err)
			return
		}
		s.mu.Lock()
		s.auditRep = rep
		s.mu.Unlock()
		s.logger.Info("audit: counting appended records", "window", time.Duration(s.cfg.AuditWindowMs)*time.Millisecond, "publish_interval", interval)
	})
}

// stopAudit publishes the counts not yet published (Shutdown, before the
// listeners close).
func (s *Server) stopAudit(ctx context.Context) {
	s.mu.Lock()
	rep := s.auditRep
	s.mu.Unlock()
	if rep == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rep.Close(ctx); err != nil {
		s.logger.Warn("audit: the last counts were not published", "err", err)
	}
}
