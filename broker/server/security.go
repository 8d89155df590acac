package server

// Listeners and authentication (broker/security does the cryptography).
//
// Each listener (config.Security.Listeners) has a security protocol:
//
//	PLAINTEXT       principal User:ANONYMOUS, every request served at once
//	SSL             TLS handshake first; principal from the client certificate
//	                (ssl.principal.mapping.rules), User:ANONYMOUS without one
//	SASL_PLAINTEXT  SaslHandshake + SaslAuthenticate before anything but ApiVersions
//	SASL_SSL        TLS, then SASL; the principal is SASL's
//
// The principal ("User:alice") is kept on the connection (conn.Principal) for
// an authorizer. Before authentication a connection is held to
// sasl.server.max.receive.size per frame, and one not authenticated
// sasl.handshake.timeout.ms after it was accepted is closed; a failed
// authentication is answered (SASL_AUTHENTICATION_FAILED) and the
// connection closed, as Kafka does. With connections.max.reauth.ms the
// answer carries the session lifetime; a request other than SaslHandshake /
// SaslAuthenticate after it ends closes the connection, and a client may
// re-authenticate on the same connection as the same principal.
//
// The auth state of a connection is touched only by its processing
// goroutine, except the authenticated flag, which the reader also reads
// (the frame size bound) and the handshake timer reads.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/broker/security"
)

// listener is one served listener.
type listener struct {
	name, protocol string
	tls            *security.TLS // SSL, SASL_SSL
	sasl           bool          // SASL_PLAINTEXT, SASL_SSL
	mechanisms     []string
	advertised     string   // advertised.listeners entry, "" = the bound address
	addr           hostPort // what clients are told (set when served; guarded by Server.mu)
	interBroker    bool     // cluster mode's replication listener: trusted by the authorizer (authorize.go)
}

// errUnauthenticated closes a connection that broke the authentication
// rules (a request before authentication, a failed authentication, an
// expired session).
var errUnauthenticated = errors.New("server: authentication")

// buildListeners prepares cfg's listeners; the first is the default one
// (Serve). With none configured there is one PLAINTEXT listener. A
// certificate reload is logged: an error once per broken file, at Error.
func buildListeners(cfg config.Broker, logger *slog.Logger) ([]*listener, error) {
	if len(cfg.Security.Listeners) == 0 {
		return []*listener{{name: config.Plaintext, protocol: config.Plaintext, advertised: cfg.AdvertisedListener}}, nil
	}
	var out []*listener
	for _, l := range cfg.Security.Listeners {
		sl := &listener{name: l.Name, protocol: l.Protocol, sasl: l.UsesSASL(), mechanisms: l.Mechanisms, advertised: l.Advertised}
		if l.UsesTLS() {
			name := l.Name
			t, err := security.NewTLS(l.TLS, func(err error) {
				if err != nil {
					logger.Error("certificate reload failed: the previous certificate stays in use until the file is fixed", "listener", name, "err", err)
				} else {
					logger.Info("certificate reloaded", "listener", name)
				}
			})
			if err != nil {
				return nil, fmt.Errorf("server: listener %s: %w", l.Name, err)
			}
			sl.tls = t
		}
		out = append(out, sl)
	}
	return out, nil
}

// findListener returns the listener named name ("" = the first).
func (s *Server) findListener(name string) (*listener, error) {
	for _, l := range s.listenerSpecs {
		if name == "" || l.name == name {
			return l, nil
		}
	}
	return nil, fmt.Errorf("server: no listener named %q in listeners", name)
}

// authState is a connection's authentication (processing goroutine only).
type authState struct {
	principal string // "User:alice"; User:ANONYMOUS before and without authentication
	user      string
	mechanism string
	conv      security.Conversation // a SASL exchange under way
	rawTokens bool                  // SaslHandshake v0: the next frames are bare SASL tokens
	expiry    time.Time             // connections.max.reauth.ms; zero = none
}

// Principal is the connection's authenticated principal in Kafka's form
// ("User:alice"; "User:ANONYMOUS" on PLAINTEXT or before authentication),
// for an authorizer. Call it from a handler (the processing goroutine).
func (c *conn) Principal() string {
	if c.auth.principal == "" {
		return security.Anonymous
	}
	return c.auth.principal
}

// needsAuth reports whether the connection must still authenticate.
func (c *conn) needsAuth() bool { return !c.authenticated.Load() }

// secure runs the TLS handshake of a TLS listener and arms the
// authentication timeout; false means the connection was closed.
func (c *conn) secure() bool {
	l := c.l
	if l.tls == nil && !l.sasl {
		c.authenticated.Store(true)
		return true
	}
	timeout := time.Duration(c.s.cfg.Security.SaslHandshakeTimeoutMs) * time.Millisecond
	if timeout > 0 {
		c.authTimer = time.AfterFunc(timeout, func() {
			if !c.authenticated.Load() {
				c.s.metrics.authentications.WithLabelValues(l.name, c.mechanismLabel(), "timeout").Inc()
				c.logger.Info("closing connection: not authenticated in time", "listener", l.name, "sasl.handshake.timeout.ms", c.s.cfg.Security.SaslHandshakeTimeoutMs)
				_ = c.nc.Close()
			}
		})
	}
	if l.tls == nil {
		return true
	}
	// connections.max.idle.ms bounds the handshake as it bounds the wait
	// for a request: without it (sasl.handshake.timeout.ms=0) a client that
	// never sends a ClientHello would hold the connection for ever.
	_ = c.nc.SetDeadline(time.Now().Add(time.Duration(c.s.cfg.ConnectionsMaxIdleMs) * time.Millisecond))
	tc := tls.Server(c.nc, l.tls.Config())
	err := tc.HandshakeContext(c.ctx)
	_ = c.nc.SetDeadline(time.Time{})
	if err != nil {
		c.s.metrics.authentications.WithLabelValues(l.name, "TLS", "failed").Inc()
		c.logger.Info("closing connection: TLS handshake failed", "listener", l.name, "err", err)
		return false
	}
	c.io = tc
	if !l.sasl {
		c.auth.principal = l.tls.Principal(tc.ConnectionState())
		c.s.metrics.authentications.WithLabelValues(l.name, "TLS", "ok").Inc()
		c.authenticated.Store(true)
	}
	return true
}

func (c *conn) mechanismLabel() string {
	if c.l.sasl {
		return "SASL"
	}
	return "TLS"
}

// gate applies the authentication rules to a request of key before it is
// dispatched; an error closes the connection.
func (c *conn) gate(key int16) error {
	if !c.l.sasl {
		return nil
	}
	saslKey := key == saslHandshakeKey || key == saslAuthenticateKey
	if c.needsAuth() {
		if !saslKey && key != apiVersionsKey {
			return fmt.Errorf("%w: listener %s: request key %d before SASL authentication", errUnauthenticated, c.l.name, key)
		}
		return nil
	}
	if !c.auth.expiry.IsZero() && !saslKey && !time.Now().Before(c.auth.expiry) {
		return fmt.Errorf("%w: SASL session of %s expired (connections.max.reauth.ms); the client did not re-authenticate", errUnauthenticated, c.auth.principal)
	}
	return nil
}

// lookupCredentials returns a user's stored SCRAM credentials.
func (s *Server) lookupCredentials(user string) (map[string]string, error) {
	if s.users == nil {
		return nil, errors.New("this broker's metadata store keeps no users")
	}
	return s.users.User(user)
}

// stepSASL feeds one client token to the exchange under way; done means
// the client is now authenticated. An error closes the connection (after
// the answer that says so).
func (c *conn) stepSASL(token []byte) (answer []byte, lifetimeMs int64, done bool, err error) {
	conv := c.auth.conv
	if conv == nil {
		return nil, 0, false, fmt.Errorf("%w: SaslAuthenticate without SaslHandshake", errUnauthenticated)
	}
	answer, done, err = conv.Step(token)
	if err != nil {
		c.auth.conv = nil
		c.s.metrics.authentications.WithLabelValues(c.l.name, c.auth.mechanism, "failed").Inc()
		c.logger.Info("authentication failed", "listener", c.l.name, "mechanism", c.auth.mechanism, "err", err)
		return nil, 0, false, err
	}
	if !done {
		return answer, 0, false, nil
	}
	c.auth.conv = nil
	principal := "User:" + conv.User()
	if c.authenticated.Load() && principal != c.auth.principal {
		c.s.metrics.authentications.WithLabelValues(c.l.name, c.auth.mechanism, "failed").Inc()
		return nil, 0, false, fmt.Errorf("%w: re-authentication as %s on a connection of %s", security.ErrAuthentication, principal, c.auth.principal)
	}
	c.auth.principal, c.auth.user = principal, conv.User()
	if ms := c.s.cfg.Security.ConnectionsMaxReauthMs; ms > 0 {
		c.auth.expiry = time.Now().Add(time.Duration(ms) * time.Millisecond)
		lifetimeMs = ms
	}
	c.s.metrics.authentications.WithLabelValues(c.l.name, c.auth.mechanism, "ok").Inc()
	if !c.authenticated.Load() {
		c.logger.Debug("authenticated", "listener", c.l.name, "mechanism", c.auth.mechanism, "principal", principal)
	}
	c.authenticated.Store(true)
	return answer, lifetimeMs, true, nil
}

// startSASL begins an exchange of mechanism (SaslHandshake).
func (c *conn) startSASL(mechanism string) error {
	if !slices.Contains(c.l.mechanisms, mechanism) {
		return fmt.Errorf("mechanism %q is not enabled on listener %s", mechanism, c.l.name)
	}
	conv, err := security.NewConversation(mechanism, c.s.lookupCredentials)
	if err != nil {
		return err
	}
	c.auth.mechanism, c.auth.conv = mechanism, conv
	return nil
}

// rawToken answers a bare SASL token (after SaslHandshake v0): a
// size-prefixed token back, or the connection closed on failure.
func (c *conn) rawToken(token []byte) error {
	answer, _, done, err := c.stepSASL(token)
	if err != nil {
		return err
	}
	if done {
		c.auth.rawTokens = false
	}
	buf := make([]byte, 4+len(answer))
	buf[0], buf[1], buf[2], buf[3] = byte(len(answer)>>24), byte(len(answer)>>16), byte(len(answer)>>8), byte(len(answer))
	copy(buf[4:], answer)
	return c.write(buf)
}

// thenClose writes a reply and then closes the connection (a failed
// authentication is answered before Kafka closes it).
type thenClose struct {
	rep    reply
	reason error
}

func (r thenClose) write(c *conn, hdr header) error {
	if err := r.rep.write(c, hdr); err != nil {
		return err
	}
	return r.reason
}

// advertisedFor is the address of the listener c arrived on.
func (s *Server) advertisedFor(c *conn) hostPort {
	if c == nil || c.l == nil {
		return s.advertised()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.l.addr == (hostPort{}) {
		return hostPort{"127.0.0.1", 9092}
	}
	return c.l.addr
}

// userStore is the metadata store's users, nil if it keeps none.
func userStore(st metadata.Store) metadata.UserStore {
	us, _ := st.(metadata.UserStore)
	return us
}

// LockDataDir takes the data directory's lock as a running broker holds it
// (an error if a broker is running on it), for offline tools such as
// `sluice users --data-dir`; call unlock when done.
func LockDataDir(dir string) (unlock func(), err error) { return lockDataDir(dir) }
