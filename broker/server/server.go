package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/audit"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/broker/cluster"
	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/group"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/broker/replica"
	"github.com/sluicehq/sluice/broker/txn"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
)

// Options configure a Server.
type Options struct {
	DataDir string        // the data directory (partition dirs and metadata files)
	Config  config.Broker // broker properties; config.Default() for Kafka's defaults
	Logger  *slog.Logger  // nil = slog.Default()
	Clock   clock.Clock   // nil = clock.Real; fetch long polls and sessions, the retention loop, the partition logs
	// FS is where the data directory lives: nil = vfs.OS{} (the real disk, and
	// sendfile for fetches); tests use vfs.NewMem and vfs.NewFaulty.
	FS vfs.FS
	// Metadata holds the topics and producer-id blocks; nil = a
	// metadata.FileStore (topics.json, producer-ids.json) in DataDir, or
	// the Cluster's Store.
	Metadata metadata.Store
	// Cluster runs the server in cluster mode (cluster.go): topics in the
	// cluster's Store, partition roles from its states. nil = single node.
	// Its OnStates should call ApplyStates once New returned.
	Cluster *cluster.Node
	// Replicated is cluster mode: the partitions' high watermarks are kept
	// from their checkpoints and moved by replication (SetReplicas), not set
	// to the log end when a partition opens.
	Replicated bool
}

// Server is a Kafka-protocol broker: the only node of a single-node broker,
// or one broker of a cluster (Options.Cluster) whose partitions it leads or
// follows (replication.go).
type Server struct {
	opts     Options
	cfg      config.Broker
	clock    clock.Clock
	logger   *slog.Logger
	mgr      *plog.Manager
	topics   *registry
	pids     *producerIDs
	metrics  *metrics
	sessions *fetchSessions // incremental fetch sessions
	reqMem   *requestMemory // queued.max.request.bytes over all connections
	groups   *group.Coordinator
	cluster  *clusterView     // nil on a single node
	replicas *replica.Manager // cluster mode (replication.go); nil = single node
	txn      *txn.Coordinator
	// listenerSpecs are the configured listeners (security.go), the
	// default one (Serve) first; never empty.
	listenerSpecs []*listener
	users         metadata.UserStore // SCRAM credentials; nil if the store keeps none
	// audit is the broker audit tier (audit.go; nil: audit.enable off).
	audit     *audit.Broker
	auditOnce sync.Once
	auditRep  *audit.BrokerReporter // guarded by mu

	// ctx is cancelled at Shutdown: long polls return, readers stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex // guards the fields below
	listeners  []net.Listener
	conns      map[*conn]struct{}
	connsPerIP map[string]int // open connections per client IP (max.connections.per.ip)
	// max.connections and max.connections.per.ip (cfg's, changeable)
	maxConns, maxConnsPerIP int64
	advertise               hostPort
	closed                  bool

	connWG      sync.WaitGroup // one per connection
	retentionWG sync.WaitGroup // the retention, group ticker and log cleaner goroutines
	longPolls   atomic.Int64   // Fetch requests waiting for data (tests, metrics)

	unlock func() // releases the data directory lock

	// Test hooks, set before serving.
	onPanic        func(any) // called when a handler panicked (a bug); the fuzz target fails on it
	partitionLimit int32     // most partitions one CreateTopics may ask for; 0 = 65536
	// listOffsetsBudget replaces listOffsetsDecompressBudget when > 0.
	listOffsetsBudget atomic.Int64
}

// New opens the data directory (recovering the partition logs), loads the
// topic registry and starts the retention loop. It does not listen yet.
func New(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, fmt.Errorf("server: a data directory is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FS == nil {
		opts.FS = vfs.OS{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if err := opts.FS.MkdirAll(opts.DataDir); err != nil {
		return nil, fmt.Errorf("server: create data dir %s: %w", opts.DataDir, err)
	}
	unlock := func() {}
	if _, onDisk := opts.FS.(vfs.OS); onDisk { // the real disk, whatever its sync setting
		var err error
		if unlock, err = lockDataDir(opts.DataDir); err != nil {
			return nil, err
		}
	}
	cfg := opts.Config
	if cfg.SocketRequestMaxBytes == 0 {
		cfg = config.Default()
	}
	mgr, err := plog.OpenManager(plog.ManagerOptions{FS: opts.FS, Dir: opts.DataDir, Clock: opts.Clock, Logger: opts.Logger})
	if err != nil {
		unlock()
		return nil, fmt.Errorf("server: open data dir %s: %w", opts.DataDir, err)
	}
	var pl placement
	if opts.Cluster != nil {
		pl = opts.Cluster
		opts.Replicated = true // the high watermark is replication's
		if opts.Metadata == nil {
			opts.Metadata = opts.Cluster.Store()
		}
	}
	if opts.Metadata == nil {
		if opts.Metadata, err = metadata.OpenFileStore(opts.FS, opts.DataDir); err != nil {
			_ = mgr.Close()
			unlock()
			return nil, metaErr(err)
		}
	}
	m := newMetrics()
	m.reg.MustRegister(mgr.Collector())
	reg, err := openRegistry(opts.Metadata, mgr, cfg, opts.Logger, m, pl, opts.Replicated)
	if err != nil {
		_ = mgr.Close()
		unlock()
		return nil, err
	}
	m.topics.Store(reg)
	pids := openProducerIDs(opts.Metadata)
	groups, err := openGroups(opts, cfg, reg, m)
	if err != nil {
		_ = mgr.Close()
		unlock()
		return nil, err
	}
	specs, err := buildListeners(cfg, opts.Logger)
	if err != nil {
		_ = mgr.Close()
		unlock()
		return nil, err
	}
	brokerAudit, err := newBrokerAudit(cfg, specs)
	if err != nil {
		_ = mgr.Close()
		unlock()
		return nil, err
	}
	txns, err := openTxn(opts, cfg, reg, groups, pids, m, brokerAudit)
	if err != nil {
		_ = mgr.Close()
		unlock()
		return nil, err
	}
	if opts.Cluster != nil {
		if ib := cfg.Security.InterBroker(); ib != nil && ib.Protocol != config.Plaintext {
			_ = mgr.Close()
			unlock()
			return nil, fmt.Errorf("server: inter-broker listener %s is %s: replication between sluice brokers speaks PLAINTEXT only; set inter.broker.listener.name to a PLAINTEXT listener", ib.Name, ib.Protocol)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{listenerSpecs: specs, users: userStore(opts.Metadata), opts: opts, cfg: cfg, clock: opts.Clock, logger: opts.Logger, mgr: mgr, topics: reg, pids: pids, metrics: m,
		sessions: newFetchSessions(int(cfg.FetchSessionSlots)), reqMem: newRequestMemory(cfg.QueuedMaxRequestBytes, m), groups: groups, txn: txns,
		ctx: ctx, cancel: cancel, conns: map[*conn]struct{}{}, connsPerIP: map[string]int{}, unlock: unlock,
		maxConns: cfg.MaxConnections, maxConnsPerIP: cfg.MaxConnectionsPerIP, audit: brokerAudit}
	s.retentionWG.Add(4)
	go s.retentionLoop()
	go s.groupLoop()
	go s.cleanerLoop()
	if opts.Cluster != nil {
		s.cluster = newClusterView(opts.Cluster)
		s.startReplication(opts.Cluster)
		s.retentionWG.Add(1)
		go s.clusterLoop()
	}
	go s.txnLoop()
	return s, nil
}

// MetricsHandler serves the Prometheus metrics.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// Listen binds addr and serves it in the background; it returns the bound
// address (useful with port 0).
func (s *Server) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server: listen %s: %w", addr, err)
	}
	go func() { _ = s.Serve(ln) }()
	return ln.Addr(), nil
}

// Serve accepts connections on ln until Shutdown. It returns ErrClosed after
// Shutdown, or net.ErrClosed if ln was closed by someone else. Other accept
// errors (such as running out of file descriptors) are logged, counted and
// retried with a backoff of up to a second. A connection beyond
// max.connections or max.connections.per.ip is closed as it arrives.
func (s *Server) Serve(ln net.Listener) error { return s.ServeListener(ln, "") }

// ServeListener is Serve for the listener of listeners named name ("" =
// the first): its security protocol, and its advertised address in
// Metadata and FindCoordinator answers to the clients that arrive on it.
func (s *Server) ServeListener(ln net.Listener, name string) error {
	spec, err := s.findListener(name)
	if err != nil {
		_ = ln.Close()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrClosed
	}
	s.listeners = append(s.listeners, ln)
	spec.addr = advertisedAddr(spec.advertised, ln.Addr())
	if s.advertise == (hostPort{}) && spec == s.listenerSpecs[0] {
		s.advertise = spec.addr
	}
	adv := spec.addr
	s.mu.Unlock()
	if spec == s.listenerSpecs[0] {
		s.startAuditReporter(ln.Addr())
	}
	s.logger.Info("listening", "listener", spec.name, "security_protocol", spec.protocol, "addr", ln.Addr().String(), "advertised", adv.String(), "node_id", s.cfg.NodeID)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrClosed
			}
			if errors.Is(err, net.ErrClosed) {
				s.mu.Lock()
				closed := s.closed
				s.mu.Unlock()
				if closed { // Shutdown closed it before cancelling
					return ErrClosed
				}
				return err
			}
			// Out of descriptors (EMFILE/ENFILE), out of buffers, an aborted
			// handshake: none is a reason to stop serving the connections
			// already open. Back off as net/http does and try again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.metrics.acceptErrors.Inc()
			s.logger.Warn("accept failed; retrying", "addr", ln.Addr().String(), "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return ErrClosed
			case <-t.C:
			}
			continue
		}
		backoff = 0
		ip := remoteIP(nc)
		c := newConn(s, nc)
		c.l = spec
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return ErrClosed
		}
		if refused := s.admitLocked(ip); refused != "" {
			s.mu.Unlock()
			s.metrics.connsRefused.WithLabelValues(refused).Inc()
			_ = nc.Close()
			s.logger.Debug("connection refused", "remote", nc.RemoteAddr().String(), "limit", refused)
			continue
		}
		c.ip = ip
		s.conns[c] = struct{}{}
		s.connsPerIP[ip]++
		s.connWG.Add(1)
		s.mu.Unlock()
		s.metrics.connsActive.Inc()
		s.metrics.connsTotal.Inc()
		go c.serve()
	}
}

// admitLocked returns "" if a new connection from ip is within
// max.connections and max.connections.per.ip, else the name of the limit
// it would cross.
func (s *Server) admitLocked(ip string) string {
	if int64(len(s.conns)) >= s.maxConns {
		return "max.connections"
	}
	if int64(s.connsPerIP[ip]) >= s.maxConnsPerIP {
		return "max.connections.per.ip"
	}
	return ""
}

// setConnectionLimits changes max.connections and max.connections.per.ip
// for connections that arrive from now on.
func (s *Server) setConnectionLimits(total, perIP int64) {
	s.mu.Lock()
	s.maxConns, s.maxConnsPerIP = total, perIP
	s.mu.Unlock()
}

// remoteIP is the client address a connection counts against for
// max.connections.per.ip.
func remoteIP(nc net.Conn) string {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return nc.RemoteAddr().String()
}

func (s *Server) connDone(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.connsPerIP[c.ip]--; s.connsPerIP[c.ip] <= 0 {
		delete(s.connsPerIP, c.ip)
	}
	s.mu.Unlock()
	s.metrics.connsActive.Dec()
	s.connWG.Done()
}

func (s *Server) advertised() hostPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.advertise == (hostPort{}) {
		return hostPort{"127.0.0.1", 9092}
	}
	return s.advertise
}

// hostPort is the address clients are told to connect to.
type hostPort struct {
	host string
	port int
}

func (h hostPort) String() string { return net.JoinHostPort(h.host, strconv.Itoa(h.port)) }

// advertisedAddr picks the address clients are told to connect to:
// advertised.listeners if set, else the bound address (127.0.0.1 for an
// unspecified IP).
func advertisedAddr(configured string, bound net.Addr) hostPort {
	if configured != "" {
		if host, port, err := net.SplitHostPort(configured); err == nil {
			if p, err := strconv.Atoi(port); err == nil && host != "" {
				return hostPort{host, p}
			}
		}
	}
	ta, ok := bound.(*net.TCPAddr)
	if !ok {
		return hostPort{"127.0.0.1", 9092}
	}
	if ta.IP == nil || ta.IP.IsUnspecified() {
		return hostPort{"127.0.0.1", ta.Port}
	}
	return hostPort{ta.IP.String(), ta.Port}
}

// Shutdown stops accepting, lets every connection finish the requests it
// has read (long polls return early), closes the connections and then the
// partition logs, which writes the clean-shutdown marker. If ctx ends first
// the remaining connections are closed hard.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopAudit(ctx) // publishes through a listener: before they close
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	s.stopCluster()
	s.closeReplicas(ctx)
	for _, c := range conns {
		c.stopReading()
	}
	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range conns {
			_ = c.nc.Close()
		}
		<-done
	}
	s.retentionWG.Wait()
	defer s.unlock()
	if err := s.mgr.Close(); err != nil {
		return fmt.Errorf("server: close logs: %w", err)
	}
	s.logger.Info("shut down cleanly")
	return nil
}

// retentionLoop runs retention and time-based flushing until Shutdown:
// every log.retention.check.interval.ms, or more often when a flush.ms
// (broker default or topic override) asks for it.
func (s *Server) retentionLoop() {
	defer s.retentionWG.Done()
	t := s.clock.NewTimer(s.maintenancePeriod())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
			if err := s.mgr.RunRetention(); err != nil {
				s.logger.Error("retention pass", "err", err)
			}
			t.Reset(s.maintenancePeriod())
		}
	}
}

// maintenancePeriod is the time to the next retention / flush pass.
func (s *Server) maintenancePeriod() time.Duration {
	period := time.Duration(s.cfg.LogRetentionCheckIntervalMs) * time.Millisecond
	consider := func(flushMs int64) {
		if !config.PageCacheFlush(flushMs) {
			period = min(period, max(time.Duration(flushMs)*time.Millisecond, 50*time.Millisecond))
		}
	}
	consider(s.cfg.TopicDefaults.FlushMs)
	for _, t := range s.topics.list() {
		consider(t.cfg.FlushMs)
	}
	return max(period, time.Millisecond)
}
