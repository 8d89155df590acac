package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"runtime"
	"strconv"
	"strings"
)

// SCRAM mechanism names, as in sasl.enabled.mechanisms.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	Plain       = "PLAIN"
)

// SCRAM iteration bounds, Kafka's (ScramMechanism.minIterations / 16384).
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 8192
)

// ErrAuthentication is returned (wrapped) for every failed authentication:
// a wrong password, an unknown user, a malformed or out-of-order message.
// Its text never holds a password.
var ErrAuthentication = errors.New("security: authentication failed")

// ErrInvalidCredential is returned (wrapped) for a credential that cannot
// be stored or parsed.
var ErrInvalidCredential = errors.New("security: invalid credential")

// scramMechanism is one SCRAM hash.
type scramMechanism struct {
	name string
	hash func() hash.Hash
	size int
}

var scramMechanisms = map[string]scramMechanism{
	ScramSHA256: {ScramSHA256, sha256.New, sha256.Size},
	ScramSHA512: {ScramSHA512, sha512.New, sha512.Size},
}

// IsScram reports whether mechanism is a SCRAM mechanism served here.
func IsScram(mechanism string) bool { _, ok := scramMechanisms[mechanism]; return ok }

// HashSize is the size of a SCRAM mechanism's salted password (0 if unknown).
func HashSize(mechanism string) int { return scramMechanisms[mechanism].size }

// Credential is a stored SCRAM credential (RFC 5802 section 3): the salt,
// the iteration count and the stored and server keys derived from the
// salted password. The password itself is never kept.
type Credential struct {
	Mechanism  string
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// NewCredential derives a credential for password with a fresh random salt.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	m, ok := scramMechanisms[mechanism]
	if !ok {
		return Credential{}, fmt.Errorf("%w: unknown SCRAM mechanism %q (use %s or %s)", ErrInvalidCredential, mechanism, ScramSHA256, ScramSHA512)
	}
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if err := checkIterations(iterations); err != nil {
		return Credential{}, err // before deriving: the work grows with the count
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	salted, err := pbkdf2.Key(m.hash, password, salt, iterations, m.size)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %v", ErrInvalidCredential, err)
	}
	return CredentialFromSalted(mechanism, salt, salted, iterations)
}

// CredentialFromSalted derives a credential from a salted password
// (Hi(password, salt, iterations)), which is what Kafka's
// AlterUserScramCredentials carries.
func CredentialFromSalted(mechanism string, salt, salted []byte, iterations int) (Credential, error) {
	m, ok := scramMechanisms[mechanism]
	if !ok {
		return Credential{}, fmt.Errorf("%w: unknown SCRAM mechanism %q", ErrInvalidCredential, mechanism)
	}
	if err := checkIterations(iterations); err != nil {
		return Credential{}, err
	}
	if len(salt) == 0 || len(salt) > 1024 {
		return Credential{}, fmt.Errorf("%w: salt of %d bytes", ErrInvalidCredential, len(salt))
	}
	if len(salted) != m.size {
		return Credential{}, fmt.Errorf("%w: salted password of %d bytes, %s needs %d", ErrInvalidCredential, len(salted), mechanism, m.size)
	}
	clientKey := hmacOf(m, salted, []byte("Client Key"))
	stored := m.hash()
	stored.Write(clientKey)
	return Credential{Mechanism: mechanism, Salt: append([]byte(nil), salt...), StoredKey: stored.Sum(nil),
		ServerKey: hmacOf(m, salted, []byte("Server Key")), Iterations: iterations}, nil
}

// verifySlots bounds the PLAIN verifications deriving at once to half the
// processors (at least one): each is up to MaxIterations of PBKDF2 (some
// 8 ms of SHA-512) that any client can ask for before authenticating, by
// reconnecting, so a flood of PLAIN attempts queues here instead of taking
// every core from the brokers' other work.
var verifySlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// deriveKey is PBKDF2 (a variable for the test that counts derivations at once).
var deriveKey = pbkdf2.Key[hash.Hash]

func checkIterations(n int) error {
	if n < MinIterations || n > MaxIterations {
		return fmt.Errorf("%w: %d iterations, outside %d..%d", ErrInvalidCredential, n, MinIterations, MaxIterations)
	}
	return nil
}

// Verify reports whether password matches the credential (PLAIN against
// the SCRAM store), in constant time over the keys. The broker derives the
// key for an unauthenticated client here, so a stored credential with more
// than MaxIterations (a hand-edited or migrated store) is refused rather
// than derived: SCRAM, where the client derives, still accepts it.
func (c Credential) Verify(password string) bool {
	m, ok := scramMechanisms[c.Mechanism]
	if !ok || c.Iterations > MaxIterations {
		return false
	}
	verifySlots <- struct{}{}
	salted, err := deriveKey(m.hash, password, c.Salt, c.Iterations, m.size)
	<-verifySlots
	if err != nil {
		return false
	}
	clientKey := hmacOf(m, salted, []byte("Client Key"))
	h := m.hash()
	h.Write(clientKey)
	return subtle.ConstantTimeCompare(h.Sum(nil), c.StoredKey) == 1
}

// String is Kafka's stored form (its ZooKeeper /config/users value):
// salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=N.
func (c Credential) String() string {
	b := base64.StdEncoding
	return "salt=" + b.EncodeToString(c.Salt) + ",stored_key=" + b.EncodeToString(c.StoredKey) +
		",server_key=" + b.EncodeToString(c.ServerKey) + ",iterations=" + strconv.Itoa(c.Iterations)
}

// ParseCredential reads the stored form String writes.
func ParseCredential(mechanism, s string) (Credential, error) {
	m, ok := scramMechanisms[mechanism]
	if !ok {
		return Credential{}, fmt.Errorf("%w: unknown SCRAM mechanism %q", ErrInvalidCredential, mechanism)
	}
	c := Credential{Mechanism: mechanism}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			c.Iterations, err = strconv.Atoi(v)
		}
		if err != nil {
			return Credential{}, fmt.Errorf("%w: %s: field %s", ErrInvalidCredential, mechanism, k)
		}
	}
	if len(c.Salt) == 0 || len(c.StoredKey) != m.size || len(c.ServerKey) != m.size || c.Iterations < 1 {
		return Credential{}, fmt.Errorf("%w: %s: incomplete credential", ErrInvalidCredential, mechanism)
	}
	return c, nil
}

func hmacOf(m scramMechanism, key, msg []byte) []byte {
	h := hmac.New(m.hash, key)
	h.Write(msg)
	return h.Sum(nil)
}

// Lookup returns a user's stored credentials (mechanism -> the form
// Credential.String writes), nil for an unknown user: one read of the user
// store per authentication, whichever mechanisms it tries.
type Lookup func(user string) (map[string]string, error)

// credential is user's credential for mechanism from lookup; ok is false
// for an unknown user or a user without that mechanism.
func credential(stored map[string]string, mechanism string) (c Credential, ok bool, err error) {
	s, ok := stored[mechanism]
	if !ok {
		return Credential{}, false, nil
	}
	c, err = ParseCredential(mechanism, s)
	return c, err == nil, err
}

// Conversation is one server side of a SASL exchange. Step takes the
// client's token and returns the server's answer; done is true once the
// client is authenticated (the answer may still have to be sent). Any error
// wraps ErrAuthentication and ends the conversation.
type Conversation interface {
	Step(token []byte) (answer []byte, done bool, err error)
	// User is the authenticated user name once done.
	User() string
}

// NewConversation starts the server side of mechanism.
func NewConversation(mechanism string, lookup Lookup) (Conversation, error) {
	if mechanism == Plain {
		return &plainConversation{lookup: lookup}, nil
	}
	m, ok := scramMechanisms[mechanism]
	if !ok {
		return nil, fmt.Errorf("%w: mechanism %q is not served", ErrAuthentication, mechanism)
	}
	return &scramConversation{m: m, lookup: lookup}, nil
}

// scramConversation is RFC 5802's server: client-first, server-first,
// client-final, server-final. Channel binding is not supported (a client
// asking for it with "p=" is refused).
type scramConversation struct {
	m      scramMechanism
	lookup Lookup
	step   int
	user   string
	cred   Credential
	gs2    string // the client's GS2 header, which c= must repeat
	nonce  string // client nonce + server nonce
	first  string // client-first-message-bare + "," + server-first-message
}

func (s *scramConversation) User() string { return s.user }

func (s *scramConversation) fail(format string, args ...any) ([]byte, bool, error) {
	s.step = -1
	return nil, false, fmt.Errorf("%w: %s: %s", ErrAuthentication, s.m.name, fmt.Sprintf(format, args...))
}

func (s *scramConversation) Step(token []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		return s.clientFirst(string(token))
	case 1:
		return s.clientFinal(string(token))
	default:
		return s.fail("message out of order")
	}
}

func (s *scramConversation) clientFirst(msg string) ([]byte, bool, error) {
	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok || (flag != "n" && flag != "y") {
		return s.fail("client-first-message: unsupported channel binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return s.fail("client-first-message: truncated")
	}
	s.gs2 = flag + "," + authz + ","
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return s.fail("client-first-message: malformed")
	}
	user, err := decodeSaslName(attrs[0][2:])
	if err != nil {
		return s.fail("client-first-message: %v", err)
	}
	if authz != "" && authz != "a="+attrs[0][2:] {
		return s.fail("authorization id differs from the user name")
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return s.fail("client-first-message: empty nonce")
	}
	stored, err := s.lookup(user)
	if err != nil {
		return s.fail("credential lookup: %v", err)
	}
	cred, found, err := credential(stored, s.m.name)
	if err != nil {
		return s.fail("credential lookup: %v", err)
	}
	if !found {
		return s.fail("unknown user or no %s credential", s.m.name)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return s.fail("nonce: %v", err)
	}
	s.user, s.cred = user, cred
	s.nonce = cnonce + base64.RawURLEncoding.EncodeToString(raw[:])
	serverFirst := "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	s.first = bare + "," + serverFirst
	s.step = 1
	return []byte(serverFirst), false, nil
}

func (s *scramConversation) clientFinal(msg string) ([]byte, bool, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return s.fail("client-final-message: no proof")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return s.fail("client-final-message: malformed")
	}
	cb, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cb) != s.gs2 {
		return s.fail("client-final-message: channel binding does not repeat the GS2 header")
	}
	if attrs[1][2:] != s.nonce {
		return s.fail("client-final-message: nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.m.size {
		return s.fail("client-final-message: malformed proof")
	}
	authMessage := []byte(s.first + "," + withoutProof)
	sig := hmacOf(s.m, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j]
	}
	h := s.m.hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey) != 1 {
		return s.fail("invalid credentials")
	}
	s.step = 2
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(s.m, s.cred.ServerKey, authMessage))), true, nil
}

// decodeSaslName undoes RFC 5802's escaping of ',' and '=' in a user name.
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("bad escape in user name")
		}
		i += 2
	}
	return b.String(), nil
}

// plainConversation is RFC 4616: one message, authzid NUL authcid NUL
// password, checked against the user's SCRAM credential (either
// mechanism), so PLAIN and SCRAM share one user store.
type plainConversation struct {
	lookup Lookup
	user   string
	used   bool
}

func (p *plainConversation) User() string { return p.user }

func (p *plainConversation) Step(token []byte) ([]byte, bool, error) {
	if p.used {
		return nil, false, fmt.Errorf("%w: PLAIN: message out of order", ErrAuthentication)
	}
	p.used = true
	parts := strings.Split(string(token), "\x00")
	if len(parts) != 3 || parts[1] == "" {
		return nil, false, fmt.Errorf("%w: PLAIN: malformed message", ErrAuthentication)
	}
	authz, user, password := parts[0], parts[1], parts[2]
	if authz != "" && authz != user {
		return nil, false, fmt.Errorf("%w: PLAIN: authorization id differs from the user name", ErrAuthentication)
	}
	stored, err := p.lookup(user)
	if err != nil {
		return nil, false, fmt.Errorf("%w: PLAIN: credential lookup: %v", ErrAuthentication, err)
	}
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		c, ok, err := credential(stored, mech)
		if err != nil {
			return nil, false, fmt.Errorf("%w: PLAIN: credential lookup: %v", ErrAuthentication, err)
		}
		if ok {
			if !c.Verify(password) {
				return nil, false, fmt.Errorf("%w: PLAIN: invalid credentials", ErrAuthentication)
			}
			p.user = user
			return nil, true, nil
		}
	}
	return nil, false, fmt.Errorf("%w: PLAIN: unknown user", ErrAuthentication)
}
