package schemaregistry

// HTTP basic authentication and per-subject permissions.
//
// Password file (Options.Auth, `sluice registry --registry-password-file`),
// one user a line, '#' starts a comment:
//
//	alice:$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy   bcrypt (htpasswd -B, or `sluice registry hash-password`)
//	bob:sha256:<salt hex>:<hex of SHA-256(salt || password)>           salted SHA-256
//	carol:plain:s3cret                                                 the password as is (tests, bootstrap)
//
// Role file (--registry-roles-file), one grant a line: a user, a subject
// prefix ('*' for every subject) and read or write (write includes read):
//
//	alice  *        write
//	bob    orders-  read
//
// Without a role file every authenticated user may read and write
// everything. With one, a subject route needs the grant on its subject;
// GET /subjects and the subjects and versions of a schema id list only the
// subjects the user may read; schemas by id
// need any grant; changing the global config needs write on '*'. A request
// without valid credentials gets 401 (error_code 401) and a
// WWW-Authenticate challenge, one without the grant 403 (error_code
// 40301), both counted in sluice_registry_auth_failures_total.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Auth is the registry's users and their grants. Build it with LoadAuth
// (or ParseAuth); nil in Options leaves the registry open.
type Auth struct {
	users  map[string]credential
	grants map[string][]grant // nil: no role file, everyone authenticated may do all

	// bcrypt costs tens of milliseconds of CPU a comparison, and any client
	// can ask for one: each user's last accepted and last refused password
	// (as keyed digests) are answered without it, so neither a client that
	// authenticates every request nor one retrying a stale password costs
	// more than one comparison, and hashing bounds the comparisons at once.
	key     [32]byte      // HMAC key of the digests, random per process
	hashing chan struct{} // a slot per bcrypt comparison in progress

	mu       sync.Mutex
	verified map[string][32]byte // user → digest of the password bcrypt last accepted
	refused  map[string][32]byte // user → digest of the password bcrypt last refused
}

// compareBcrypt is bcrypt's comparison (a variable for the tests that
// count comparisons).
var compareBcrypt = bcrypt.CompareHashAndPassword

type credential struct {
	kind string // bcrypt | sha256 | plain
	hash []byte
	salt []byte
}

type grant struct {
	prefix string // "" is every subject
	write  bool
}

// maxAuthFile bounds a password or role file.
const maxAuthFile = 4 << 20

// LoadAuth reads the password file and, when rolesPath is not empty, the
// role file.
func LoadAuth(passwordPath, rolesPath string) (*Auth, error) {
	read := func(p string) (string, error) {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("schemaregistry: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxAuthFile+1))
		if err != nil {
			return "", fmt.Errorf("schemaregistry: %s: %w", p, err)
		}
		if len(b) > maxAuthFile {
			return "", fmt.Errorf("schemaregistry: %s is larger than %d bytes", p, maxAuthFile)
		}
		return string(b), nil
	}
	pw, err := read(passwordPath)
	if err != nil {
		return nil, err
	}
	roles := ""
	if rolesPath != "" {
		if roles, err = read(rolesPath); err != nil {
			return nil, err
		}
	}
	a, err := ParseAuth(pw, roles, rolesPath != "")
	if err != nil {
		return nil, fmt.Errorf("schemaregistry: %w", err)
	}
	return a, nil
}

// ParseAuth parses a password file's text and, when withRoles, a role
// file's text (see the file comment for both formats). Errors name the
// line, never a password.
func ParseAuth(passwords, roles string, withRoles bool) (*Auth, error) {
	a := &Auth{users: map[string]credential{}, verified: map[string][32]byte{}, refused: map[string][32]byte{},
		hashing: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
	if _, err := rand.Read(a.key[:]); err != nil {
		return nil, err
	}
	err := eachLine(passwords, func(n int, line string) error {
		user, secret, ok := strings.Cut(line, ":")
		user = strings.TrimSpace(user)
		secret = strings.TrimSpace(secret)
		if !ok || user == "" || secret == "" {
			return fmt.Errorf("password file line %d: want USER:SECRET", n)
		}
		if _, dup := a.users[user]; dup {
			return fmt.Errorf("password file line %d: user %q is listed twice", n, user)
		}
		var c credential
		switch {
		case strings.HasPrefix(secret, "$2"):
			if _, err := bcrypt.Cost([]byte(secret)); err != nil {
				return fmt.Errorf("password file line %d: user %q: not a bcrypt hash: %v", n, user, err)
			}
			c = credential{kind: "bcrypt", hash: []byte(secret)}
		case strings.HasPrefix(secret, "sha256:"):
			salt, sum, ok := strings.Cut(strings.TrimPrefix(secret, "sha256:"), ":")
			s, err1 := hex.DecodeString(salt)
			h, err2 := hex.DecodeString(sum)
			if !ok || err1 != nil || err2 != nil || len(h) != sha256.Size || len(s) == 0 {
				return fmt.Errorf("password file line %d: user %q: want sha256:<salt hex>:<64 hex digits>", n, user)
			}
			c = credential{kind: "sha256", hash: h, salt: s}
		case strings.HasPrefix(secret, "plain:"):
			c = credential{kind: "plain", hash: []byte(strings.TrimPrefix(secret, "plain:"))}
		default:
			return fmt.Errorf("password file line %d: user %q: the secret must start with $2 (bcrypt), sha256: or plain:", n, user)
		}
		a.users[user] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(a.users) == 0 {
		return nil, fmt.Errorf("password file: no user")
	}
	if !withRoles {
		return a, nil
	}
	a.grants = map[string][]grant{}
	err = eachLine(roles, func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) != 3 || (f[2] != "read" && f[2] != "write") {
			return fmt.Errorf("role file line %d: want USER SUBJECT-PREFIX read|write", n)
		}
		if _, ok := a.users[f[0]]; !ok {
			return fmt.Errorf("role file line %d: user %q is not in the password file", n, f[0])
		}
		prefix := f[1]
		if prefix == "*" {
			prefix = ""
		}
		a.grants[f[0]] = append(a.grants[f[0]], grant{prefix: prefix, write: f[2] == "write"})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

func eachLine(text string, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), maxAuthFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return sc.Err()
}

// HashSHA256 returns a salted SHA-256 password file secret for password.
func HashSHA256(salt []byte, password string) string {
	h := sha256.Sum256(append(append([]byte{}, salt...), password...))
	return "sha256:" + hex.EncodeToString(salt) + ":" + hex.EncodeToString(h[:])
}

// authenticate returns the user of a request with valid basic
// credentials; an error when ctx ends while the request waits for a
// bcrypt comparison.
func (a *Auth) authenticate(ctx context.Context, req *http.Request) (string, bool, *apiError) {
	user, pass, ok := req.BasicAuth()
	if !ok || len(pass) > 1024 {
		return "", false, nil
	}
	c, known := a.users[user]
	if !known {
		return "", false, nil
	}
	switch c.kind {
	case "plain":
		return user, subtle.ConstantTimeCompare(c.hash, []byte(pass)) == 1, nil
	case "sha256":
		h := sha256.Sum256(append(append([]byte{}, c.salt...), pass...))
		return user, subtle.ConstantTimeCompare(c.hash, h[:]) == 1, nil
	}
	mac := hmac.New(sha256.New, a.key[:])
	mac.Write([]byte(pass))
	var sum [32]byte
	mac.Sum(sum[:0])
	a.mu.Lock()
	accepted, refused := a.verified[user] == sum, a.refused[user] == sum
	a.mu.Unlock()
	switch {
	case accepted:
		return user, true, nil
	case refused:
		return "", false, nil
	}
	select {
	case a.hashing <- struct{}{}:
	case <-ctx.Done():
		return "", false, errorf(codeOperationTimeout, "Too many authentications in progress; retry")
	}
	ok = compareBcrypt(c.hash, []byte(pass)) == nil
	<-a.hashing
	a.mu.Lock()
	if ok {
		a.verified[user] = sum
	} else {
		a.refused[user] = sum
	}
	a.mu.Unlock()
	if !ok {
		return "", false, nil
	}
	return user, true, nil
}

// may reports whether user may read (or write) subject; subject "" asks
// for a grant on every subject ('*').
func (a *Auth) may(user, subject string, write bool) bool {
	if a.grants == nil {
		return true
	}
	for _, g := range a.grants[user] {
		if (!write || g.write) && strings.HasPrefix(subject, g.prefix) && (subject != "" || g.prefix == "") {
			return true
		}
	}
	return false
}

// mayAny reports whether user has any grant.
func (a *Auth) mayAny(user string) bool { return a.grants == nil || len(a.grants[user]) > 0 }

// authorize decides a request on route pattern: the user, and an error
// (401 or 403) when it may not go on.
func (r *Registry) authorize(ctx context.Context, pattern string, req *http.Request) (string, *apiError) {
	a := r.opts.Auth
	if a == nil {
		return "", nil
	}
	user, ok, busy := a.authenticate(ctx, req)
	if busy != nil {
		return "", busy
	}
	if !ok {
		r.metrics.authFailures.WithLabelValues("unauthenticated").Inc()
		r.logger.Info("schema registry: authentication failed", "remote", req.RemoteAddr, "route", pattern)
		return "", &apiError{code: codeUnauthorized, message: "Unauthorized"}
	}
	write := req.Method != http.MethodGet
	if strings.HasPrefix(pattern, "POST /compatibility/") || strings.HasPrefix(pattern, "POST /subjects/{subject}") && !strings.HasSuffix(pattern, "/versions") {
		write = false // a check or a lookup changes nothing
	}
	var allowed bool
	switch {
	case req.PathValue("subject") != "":
		allowed = a.may(user, req.PathValue("subject"), write)
	case strings.HasPrefix(pattern, "GET /schemas/ids/"), pattern == "GET /subjects", pattern == "GET /config", pattern == "GET /{$}", pattern == "GET /schemas/types":
		allowed = a.mayAny(user)
	default: // the global config
		allowed = a.may(user, "", write)
	}
	if !allowed {
		r.metrics.authFailures.WithLabelValues("forbidden").Inc()
		r.logger.Info("schema registry: permission denied", "user", user, "route", pattern, "subject", req.PathValue("subject"))
		return user, &apiError{code: codeForbidden, message: fmt.Sprintf("User %s is denied operation on %s", user, pattern)}
	}
	return user, nil
}

// mayRead reports whether the request's user may read subject: what
// every answer listing subjects (GET /subjects, the subjects and versions
// of a schema id) keeps.
func (r *Registry) mayRead(req *request, subject string) bool {
	return r.opts.Auth == nil || r.opts.Auth.may(req.user, subject, false)
}
