package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/broker/cluster"
	"github.com/sluicehq/sluice/broker/server"
)

// member is a broker's membership of a cluster: its cluster.Node, and the
// hook that hands the Node's partition states to the server once it exists
// (the Node starts first: the server reads its topics from the Node's
// Store).
type member struct {
	node *cluster.Node

	ready  chan struct{} // closed when srv is set
	closed chan struct{} // closed by leave: deliveries stop waiting
	once   sync.Once
	srv    *server.Server
}

// join registers this broker in the cluster of opts.Config.ZookeeperConnect,
// advertising the client listener (advertised.listeners, else the bound
// address) for clients and replication alike.
// Every listener is registered as an endpoint (Metadata answers a client
// the addresses of the listener it arrived on); followers replicate over
// the inter-broker listener, which must be PLAINTEXT (server.New refuses
// another).
func join(opts Options, lns []boundListener) (*member, error) {
	cfg := opts.Config
	host, port, err := advertised(cfg.AdvertisedListener, lns[0].ln.Addr())
	if err != nil {
		return nil, err
	}
	endpoints := []cluster.Endpoint{{Name: "PLAINTEXT", Host: host, Port: port}}
	replication := "PLAINTEXT"
	if specs := cfg.Security.Listeners; len(specs) > 0 {
		endpoints = endpoints[:0]
		ib := cfg.Security.InterBroker()
		for i, l := range specs {
			h, p, err := advertised(l.Advertised, lns[i].ln.Addr())
			if err != nil {
				return nil, err
			}
			endpoints = append(endpoints, cluster.Endpoint{Name: l.Name, Host: h, Port: p})
			if l.Name == ib.Name {
				host, port, replication = h, p, l.Name
			}
		}
	}
	m := &member{ready: make(chan struct{}), closed: make(chan struct{})}
	ctx := context.Background()
	m.node, err = cluster.Start(ctx, cluster.Options{
		Connect:        cfg.ZookeeperConnect,
		SessionTimeout: time.Duration(cfg.ZookeeperSessionTimeoutMs) * time.Millisecond,
		Broker: cluster.BrokerInfo{ID: cfg.NodeID, Host: host, Port: port, Rack: cfg.Rack,
			Endpoints: endpoints},
		ReplicationListener:       replication,
		UncleanLeaderElection:     cfg.TopicDefaults.UncleanLeaderElection,
		AutoLeaderRebalance:       cfg.AutoLeaderRebalance,
		LeaderImbalanceCheck:      time.Duration(cfg.LeaderImbalanceCheckSecs) * time.Second,
		LeaderImbalancePercentage: int(cfg.LeaderImbalancePercentage),
		DefaultReplicationFactor:  int(cfg.DefaultReplicationFactor),
		OnStates:                  m.deliver,
		Logger:                    opts.Logger.With("component", "cluster"),
	})
	if err != nil {
		return nil, fmt.Errorf("broker: join the cluster at %s: %w", cfg.ZookeeperConnect, err)
	}
	return m, nil
}

// advertised is the host and port the broker registers.
func advertised(configured string, bound net.Addr) (string, int32, error) {
	addr := configured
	if addr == "" {
		ta, ok := bound.(*net.TCPAddr)
		if !ok {
			return "", 0, fmt.Errorf("broker: cannot advertise %s", bound)
		}
		host := ta.IP.String()
		if ta.IP == nil || ta.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
		return host, int32(ta.Port), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("broker: advertised.listeners %q: %w", configured, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("broker: advertised.listeners %q: want host:port", configured)
	}
	return host, int32(p), nil
}

// deliver is the Node's OnStates: it waits until the server exists, then
// hands it the states (or drops them once the broker is leaving).
func (m *member) deliver(states []cluster.PartitionState) {
	select {
	case <-m.ready:
		m.srv.ApplyStates(states)
	case <-m.closed:
	}
}

// serve hands the states to srv from now on.
func (m *member) serve(srv *server.Server) {
	if m == nil {
		return
	}
	m.srv = srv
	close(m.ready)
}

// controlledShutdown moves this broker's leaderships to other in-sync
// replicas before it stops (bounded by ctx); a failure is logged, and the
// broker stops anyway (its partitions then move when its session ends).
func (m *member) controlledShutdown(ctx context.Context, logger *slog.Logger) {
	if m == nil {
		return
	}
	start := time.Now()
	if err := m.node.ControlledShutdown(ctx); err != nil {
		logger.Warn("controlled shutdown incomplete; stopping anyway", "err", err)
		return
	}
	logger.Info("controlled shutdown done", "elapsed", time.Since(start).String())
}

// leave ends the membership: the registration goes with the session.
func (m *member) leave() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		close(m.closed)
		m.node.Close()
	})
}
