package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/internal/zksession"
)

// Options configure a Node.
type Options struct {
	// Connect is host:port[,host:port]/chroot (--zookeeper).
	Connect string
	// SessionTimeout is the ZooKeeper session timeout
	// (zookeeper.session.timeout.ms; default 18 s as in Kafka).
	SessionTimeout time.Duration
	// Broker is what this broker registers: its id (--node-id), client
	// listener, rack (broker.rack) and endpoints.
	Broker BrokerInfo
	// ReplicationListener names the endpoint followers fetch from (Addr);
	// default "REPLICATION", falling back to the client listener.
	ReplicationListener string
	// RegisterWait bounds how long Start waits for a registration of the
	// same id by another session to go away (a previous run of this broker
	// whose session has not expired yet); default the session timeout plus
	// 2 s. A registration still there after it is ErrBrokerIDInUse.
	RegisterWait time.Duration
	// UncleanLeaderElection is unclean.leader.election.enable for topics
	// that do not override it (default false: offline rather than lose data).
	UncleanLeaderElection bool
	// AutoLeaderRebalance is auto.leader.rebalance.enable: every
	// LeaderImbalanceCheck the controller checks each broker's partitions
	// (those it is the preferred replica of) and, when more than
	// LeaderImbalancePercentage of them are led elsewhere, moves the
	// leadership of each back to it where it is live and in the ISR.
	AutoLeaderRebalance bool
	// LeaderImbalanceCheck is leader.imbalance.check.interval.seconds
	// (default 300 s, as in Kafka).
	LeaderImbalanceCheck time.Duration
	// LeaderImbalancePercentage is leader.imbalance.per.broker.percentage:
	// 0 (the zero value) rebalances at any imbalance; the broker's config
	// defaults it to Kafka's 10.
	LeaderImbalancePercentage int
	// DefaultReplicationFactor is default.replication.factor for topics
	// created through the Store without an assignment (default 1).
	DefaultReplicationFactor int
	// OnStates is called, from one goroutine, with the states of this
	// broker's partitions that changed since the last call (a new version or
	// a new assignment), and with all of them after each new session. The
	// server's adapter turns them into replica.State and calls Apply. It
	// may block (until the server is ready to apply them): changes made
	// meanwhile are coalesced and delivered when it returns.
	OnStates func([]PartitionState)
	// OnStateChange, when set, is called after every partition state write
	// this Node made (as controller or through AlterISR) with the state it
	// was conditional on (Version -1: created) and the state written: a
	// state-change log, and the history the tests check.
	OnStateChange func(old, new PartitionState)
	// Rand picks assignment start points (default: randomly seeded).
	Rand   *rand.Rand
	Logger *slog.Logger
}

// Node is one broker's part in the cluster: its registration, its
// candidacy for (and, when elected, its run as) the controller, the watch
// that tells it the states of its partitions, AlterISR and the metadata
// Store. It lives across ZooKeeper sessions: when one expires it dials a
// new one, registers again and starts over.
type Node struct {
	opts Options
	log  *slog.Logger

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once

	mu         sync.Mutex // guards the fields below
	sess       *zksession.Session
	brokers    map[int32]BrokerInfo
	partitions map[partitionKey]PartitionState
	controller int32 // the controller's id as last seen; -1 none
	leading    bool  // this node is the controller
	// configVersions are the versions of the topics' /config/topics
	// znodes as last seen (-1: none); configGen counts their changes.
	configVersions map[string]int32
	configGen      int64
	changed        chan struct{}
	rnd            *rand.Rand
}

// Start dials ZooKeeper, creates the cluster's persistent paths, registers
// the broker and starts the controller candidacy and the state watch. It
// fails when ZooKeeper is unreachable, or with ErrBrokerIDInUse when the id
// stays registered by another live session for RegisterWait.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 18 * time.Second
	}
	if opts.RegisterWait <= 0 {
		opts.RegisterWait = opts.SessionTimeout + 2*time.Second
	}
	if opts.ReplicationListener == "" {
		opts.ReplicationListener = "REPLICATION"
	}
	if opts.LeaderImbalanceCheck <= 0 {
		opts.LeaderImbalanceCheck = 300 * time.Second
	}
	if opts.DefaultReplicationFactor <= 0 {
		opts.DefaultReplicationFactor = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Broker.ID < 0 {
		return nil, fmt.Errorf("%w: broker id %d: must be 0 or more", ErrInvalid, opts.Broker.ID)
	}
	rnd := opts.Rand
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	n := &Node{opts: opts, log: opts.Logger.With("broker", opts.Broker.ID), stop: make(chan struct{}), stopped: make(chan struct{}),
		brokers: map[int32]BrokerInfo{}, controller: -1, changed: make(chan struct{}), rnd: rnd}
	s, err := n.connect(ctx)
	if err != nil {
		return nil, err
	}
	n.sess = s
	go n.run(s)
	return n, nil
}

// connect dials a session, creates the persistent paths and registers.
func (n *Node) connect(ctx context.Context) (*zksession.Session, error) {
	s, err := zksession.Dial(n.opts.Connect, n.opts.SessionTimeout, n.log)
	if err != nil {
		return nil, err
	}
	for _, p := range persistentPaths {
		if err := s.Ensure(p); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := n.register(ctx, s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// register creates /brokers/ids/<id> (ephemeral). A node of the same id
// owned by another session is waited for (up to RegisterWait), then refused.
func (n *Node) register(ctx context.Context, s *zksession.Session) error {
	p := s.Path(brokerPath(n.opts.Broker.ID))
	deadline := time.NewTimer(n.opts.RegisterWait)
	defer deadline.Stop()
	for {
		_, err := s.ZK().Create(p, encodeBroker(n.opts.Broker, time.Now().UnixMilli()), zk.FlagEphemeral, acl)
		if err == nil {
			n.log.Info("registered", "path", brokerPath(n.opts.Broker.ID))
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("cluster: register %s: %w", brokerPath(n.opts.Broker.ID), err)
		}
		ok, st, ch, err := s.ZK().ExistsW(p)
		if err != nil {
			return fmt.Errorf("cluster: register %s: %w", brokerPath(n.opts.Broker.ID), err)
		}
		if ok && st.EphemeralOwner == s.SessionID() {
			return nil // our own create landed before a lost answer
		}
		if !ok {
			continue
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("%w: broker id %d is registered at %s by another live ZooKeeper session (0x%x): another broker runs with this id, or a previous run of this one has not timed out yet (retry after zookeeper.session.timeout.ms)",
				ErrBrokerIDInUse, n.opts.Broker.ID, brokerPath(n.opts.Broker.ID), st.EphemeralOwner)
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Expired():
			return fmt.Errorf("cluster: register: %w", zksession.ErrUnreachable)
		}
	}
}

// run serves each session until it ends, then dials the next one, until Close.
func (n *Node) run(s *zksession.Session) {
	defer close(n.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-n.stop; cancel() }()
	for {
		n.mu.Lock()
		n.sess = s
		n.mu.Unlock()
		n.serve(ctx, s)
		n.mu.Lock()
		n.sess, n.leading, n.controller = nil, false, -1
		n.mu.Unlock()
		s.Close()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			s, err = n.connect(ctx)
			if err == nil {
				break
			}
			n.log.Warn("cannot rejoin the cluster; retrying", "err", err)
			pause(ctx, time.Second)
		}
	}
}

// serve runs the controller candidacy and the state watch on s until its
// session ends or ctx ends.
func (n *Node) serve(ctx context.Context, s *zksession.Session) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Expired():
			cancel()
		case <-sctx.Done():
		}
		// Ending the session fails the calls still waiting on it (ZooKeeper
		// may be unreachable), so the goroutines below return.
		s.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.campaign(sctx, s) }()
	go func() { defer wg.Done(); n.watchStates(sctx, s) }()
	wg.Wait()
}

// Close leaves the cluster: the controller (if this node is it) stops and
// the session ends, which deletes the registration at once.
func (n *Node) Close() {
	n.once.Do(func() { close(n.stop) })
	<-n.stopped
}

// ID is this broker's id.
func (n *Node) ID() int32 { return n.opts.Broker.ID }

// session returns the current session, or an error between sessions.
func (n *Node) session() (*zksession.Session, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sess == nil {
		select {
		case <-n.stop:
			return nil, ErrClosed
		default:
		}
		return nil, fmt.Errorf("cluster: no ZooKeeper session: %w", zksession.ErrUnreachable)
	}
	return n.sess, nil
}

// Brokers returns the live brokers as last seen (the watch keeps it fresh).
func (n *Node) Brokers() []BrokerInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]BrokerInfo, 0, len(n.brokers))
	for _, b := range n.brokers {
		out = append(out, b)
	}
	sortBrokers(out)
	return out
}

// Addr resolves a live broker id to the host:port of its replication
// listener (the client listener when it has none). It implements
// broker/replica's Brokers.
func (n *Node) Addr(id int32) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, ok := n.brokers[id]
	if !ok {
		return "", false
	}
	for _, e := range b.Endpoints {
		if e.Name == n.opts.ReplicationListener {
			return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), true
		}
	}
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), true
}

// Controller returns the controller's broker id as last seen (-1: none
// known) and whether this node is the controller.
func (n *Node) Controller() (id int32, self bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.controller, n.leading
}

// Changed returns a channel closed at the next change this node sees (a
// partition state, a broker, the controller): tests and ControlledShutdown
// wait on it instead of sleeping.
func (n *Node) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

func (n *Node) notifyChanged() {
	n.mu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// pause waits d or until ctx ends (network backoff, in wall-clock time).
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
