package config

// Listeners and security properties, with Kafka's names:
//
//	listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094
//	listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL  (names other than the four protocols)
//	advertised.listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://kafka.example.com:9094
//	inter.broker.listener.name / security.inter.broker.protocol
//	ssl.keystore.*, ssl.truststore.*, ssl.client.auth, ssl.enabled.protocols, ssl.principal.mapping.rules
//	sasl.enabled.mechanisms, sasl.server.max.receive.size, connections.max.reauth.ms
//	listener.name.<name>.<ssl.* or sasl.enabled.mechanisms>: that listener's own value
//
// These are not reported by DescribeConfigs (several are secrets).

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/broker/security"
)

// Security protocols (listener.security.protocol.map values).
const (
	Plaintext     = "PLAINTEXT"
	SSL           = "SSL"
	SaslPlaintext = "SASL_PLAINTEXT"
	SaslSSL       = "SASL_SSL"
)

// Listener is one entry of listeners.
type Listener struct {
	Name     string // the listener name (PLAINTEXT, or a name of listener.security.protocol.map)
	Protocol string // PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
	Addr     string // host:port to bind (an empty host binds every address)
	// Advertised is this listener's entry of advertised.listeners (host:port),
	// "" = the bound address.
	Advertised string
	TLS        security.TLSOptions // the ssl.* properties (listener.name.<name>.ssl.* wins); SSL and SASL_SSL
	Mechanisms []string            // sasl.enabled.mechanisms; SASL_PLAINTEXT and SASL_SSL
}

// UsesTLS reports whether the listener speaks TLS.
func (l Listener) UsesTLS() bool { return l.Protocol == SSL || l.Protocol == SaslSSL }

// UsesSASL reports whether the listener authenticates with SASL.
func (l Listener) UsesSASL() bool { return l.Protocol == SaslPlaintext || l.Protocol == SaslSSL }

// Security is the broker-wide part of the security properties.
type Security struct {
	Listeners []Listener // listeners, in the order given; empty = one PLAINTEXT listener at --listen
	// InterBrokerListener is inter.broker.listener.name, or the listener of
	// security.inter.broker.protocol ("" = the first listener).
	InterBrokerListener    string
	SaslMaxReceiveSize     int64 // sasl.server.max.receive.size: largest frame before authentication (Kafka's 524288)
	ConnectionsMaxReauthMs int64 // connections.max.reauth.ms: a SASL session's lifetime, 0 = no limit
	// SaslHandshakeTimeoutMs (sluice's sasl.handshake.timeout.ms): a SASL
	// or TLS connection not authenticated this long after it was accepted
	// is closed.
	SaslHandshakeTimeoutMs int64
	Authorizer             Authorizer // authorizer.class.name, super.users, ... (authorizer.go)
}

// DefaultSaslMaxReceiveSize is Kafka's sasl.server.max.receive.size.
const DefaultSaslMaxReceiveSize = 524288

var securityKeys = map[string]bool{
	"listeners": true, "advertised.listeners": true, "listener.security.protocol.map": true,
	"inter.broker.listener.name": true, "security.inter.broker.protocol": true,
	"sasl.enabled.mechanisms": true, "sasl.server.max.receive.size": true, "connections.max.reauth.ms": true,
	"sasl.handshake.timeout.ms": true, "sasl.mechanism.inter.broker.protocol": true,
}

var tlsKeys = []string{"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
	"ssl.client.auth", "ssl.enabled.protocols", "ssl.principal.mapping.rules"}

// IsSecurityProperty reports whether name is a listener or security
// property read by parseSecurity.
func IsSecurityProperty(name string) bool {
	if securityKeys[name] || authorizerKeys[name] {
		return true
	}
	if strings.HasPrefix(name, "listener.name.") {
		return true
	}
	for _, k := range tlsKeys {
		if name == k {
			return true
		}
	}
	return false
}

func parseSecurity(props map[string]string) (Security, error) {
	sec := Security{SaslMaxReceiveSize: DefaultSaslMaxReceiveSize, SaslHandshakeTimeoutMs: 10000}
	for key, field := range map[string]*int64{"sasl.server.max.receive.size": &sec.SaslMaxReceiveSize,
		"connections.max.reauth.ms": &sec.ConnectionsMaxReauthMs, "sasl.handshake.timeout.ms": &sec.SaslHandshakeTimeoutMs} {
		if v, ok := props[key]; ok {
			n, err := parseInt64AtLeast(v, 0)
			if err != nil {
				return sec, fmt.Errorf("%w: %s: %v", ErrInvalid, key, err)
			}
			*field = n
		}
	}
	var err error
	if sec.Authorizer, err = parseAuthorizer(props); err != nil {
		return sec, err
	}
	if sec.SaslMaxReceiveSize < 64 {
		return sec, fmt.Errorf("%w: sasl.server.max.receive.size must be at least 64", ErrInvalid)
	}
	protoMap := map[string]string{Plaintext: Plaintext, SSL: SSL, SaslPlaintext: SaslPlaintext, SaslSSL: SaslSSL}
	if v := strings.TrimSpace(props["listener.security.protocol.map"]); v != "" {
		protoMap = map[string]string{}
		for _, e := range strings.Split(v, ",") {
			name, proto, ok := strings.Cut(strings.TrimSpace(e), ":")
			proto = strings.ToUpper(strings.TrimSpace(proto))
			if !ok || name == "" || !validProtocol(proto) {
				return sec, fmt.Errorf("%w: listener.security.protocol.map: %q: want NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", ErrInvalid, e)
			}
			protoMap[strings.ToUpper(strings.TrimSpace(name))] = proto
		}
	}
	entries, err := parseListenerList("listeners", props["listeners"])
	if err != nil {
		return sec, err
	}
	advertised, err := parseListenerList("advertised.listeners", props["advertised.listeners"])
	if err != nil {
		return sec, err
	}
	advByName := map[string]string{}
	for _, a := range advertised {
		advByName[a.name] = a.addr
	}
	seen := map[string]bool{}
	for _, e := range entries {
		proto, ok := protoMap[e.name]
		if !ok {
			return sec, fmt.Errorf("%w: listeners: %s has no security protocol; add %s:PROTOCOL to listener.security.protocol.map", ErrInvalid, e.name, e.name)
		}
		if seen[e.name] {
			return sec, fmt.Errorf("%w: listeners: %s appears twice", ErrInvalid, e.name)
		}
		seen[e.name] = true
		l := Listener{Name: e.name, Protocol: proto, Addr: e.addr, Advertised: advByName[e.name]}
		if l.UsesTLS() {
			l.TLS = tlsOptions(props, "listener.name."+strings.ToLower(e.name)+".")
		}
		if l.UsesSASL() {
			mechs := props["sasl.enabled.mechanisms"]
			if v, ok := props["listener.name."+strings.ToLower(e.name)+".sasl.enabled.mechanisms"]; ok {
				mechs = v
			}
			if l.Mechanisms, err = parseMechanisms(mechs); err != nil {
				return sec, err
			}
		}
		sec.Listeners = append(sec.Listeners, l)
	}
	for name := range advByName {
		if !seen[name] {
			return sec, fmt.Errorf("%w: advertised.listeners: %s is not in listeners", ErrInvalid, name)
		}
	}
	ibl := strings.ToUpper(strings.TrimSpace(props["inter.broker.listener.name"]))
	ibp := strings.ToUpper(strings.TrimSpace(props["security.inter.broker.protocol"]))
	switch {
	case ibl != "" && ibp != "":
		return sec, fmt.Errorf("%w: set only one of inter.broker.listener.name and security.inter.broker.protocol", ErrInvalid)
	case ibl != "":
		if len(entries) > 0 && !seen[ibl] {
			return sec, fmt.Errorf("%w: inter.broker.listener.name=%s is not in listeners", ErrInvalid, ibl)
		}
		sec.InterBrokerListener = ibl
	case ibp != "":
		if !validProtocol(ibp) {
			return sec, fmt.Errorf("%w: security.inter.broker.protocol=%s: not a security protocol", ErrInvalid, ibp)
		}
		for _, l := range sec.Listeners {
			if l.Protocol == ibp {
				sec.InterBrokerListener = l.Name
				break
			}
		}
		if sec.InterBrokerListener == "" && len(sec.Listeners) > 0 {
			return sec, fmt.Errorf("%w: security.inter.broker.protocol=%s: no listener uses it", ErrInvalid, ibp)
		}
	}
	return sec, nil
}

// InterBroker is the listener brokers replicate over (nil with no
// listeners configured: the single PLAINTEXT one).
func (s Security) InterBroker() *Listener {
	for i := range s.Listeners {
		if s.InterBrokerListener == "" || s.Listeners[i].Name == s.InterBrokerListener {
			return &s.Listeners[i]
		}
	}
	return nil
}

func validProtocol(p string) bool {
	return p == Plaintext || p == SSL || p == SaslPlaintext || p == SaslSSL
}

func tlsOptions(props map[string]string, prefix string) security.TLSOptions {
	get := func(k string) string {
		if v, ok := props[prefix+k]; ok {
			return strings.TrimSpace(v)
		}
		return strings.TrimSpace(props[k])
	}
	return security.TLSOptions{
		KeystoreType: get("ssl.keystore.type"), KeystoreLocation: get("ssl.keystore.location"),
		KeystoreCertificateChain: get("ssl.keystore.certificate.chain"), KeystoreKey: get("ssl.keystore.key"),
		KeyPassword: get("ssl.key.password"), TruststoreType: get("ssl.truststore.type"),
		TruststoreLocation: get("ssl.truststore.location"), TruststoreCertificates: get("ssl.truststore.certificates"),
		ClientAuth: get("ssl.client.auth"), EnabledProtocols: get("ssl.enabled.protocols"),
		PrincipalMappingRules: get("ssl.principal.mapping.rules"),
	}
}

func parseMechanisms(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("%w: sasl.enabled.mechanisms is required for a SASL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", ErrInvalid)
	}
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m != security.Plain && !security.IsScram(m) {
			return nil, fmt.Errorf("%w: sasl.enabled.mechanisms: %s is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", ErrInvalid, m)
		}
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

type listenerEntry struct{ name, addr string }

// parseListenerList parses NAME://host:port[,NAME://host:port...]; a bare
// host:port (sluice's older form) is PLAINTEXT.
func parseListenerList(key, v string) ([]listenerEntry, error) {
	var out []listenerEntry
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		name, addr, ok := strings.Cut(e, "://")
		if !ok {
			name, addr = Plaintext, e
		}
		name = strings.ToUpper(name)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %q: want NAME://host:port", ErrInvalid, key, e)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%w: %s: %q: bad port", ErrInvalid, key, e)
		}
		out = append(out, listenerEntry{name, net.JoinHostPort(host, port)})
	}
	return out, nil
}
