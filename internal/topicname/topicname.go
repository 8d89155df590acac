// Package topicname holds Kafka's rules for topic names: the one copy that the
// broker (creating, auto-creating and recovering topics, opening partition
// logs), the loader (job specs, splits, the files it commits) and the tools
// check against. It imports nothing of sluice, so every package may use it.
//
// A legal name is 1 to 249 bytes of [a-zA-Z0-9._-] and is neither "." nor
// "..": Kafka's rule, which also makes a name safe as one path element (no
// '/', '\\', '+', space or NUL). Two legal names may still collide: Kafka
// refuses a topic whose name differs from an existing one only by '.'
// against '_', since metric names do not tell them apart (see Collides).
package topicname

import (
	"errors"
	"fmt"
)

// MaxLength is the longest legal topic name, in bytes (Kafka's limit:
// "<topic>-<partition>" must fit in a 255-byte file name).
const MaxLength = 249

// Rule is the naming rule in words, for error messages.
const Rule = `1 to 249 characters of [a-zA-Z0-9._-], not "." or ".."`

// ErrInvalid is wrapped by every error Check returns.
var ErrInvalid = errors.New("topicname: invalid topic name")

// Check returns nil if name is a legal Kafka topic name, and otherwise an
// error wrapping ErrInvalid that names the topic and states the rule.
func Check(name string) error {
	if !legal(name) {
		return fmt.Errorf("%w %q: use %s", ErrInvalid, name, Rule)
	}
	return nil
}

func legal(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > MaxLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Collides reports whether two different names clash in metric names
// ('.' and '_' are interchangeable there), which Kafka refuses: a topic
// "a.b" may not be created beside "a_b".
func Collides(a, b string) bool {
	if a == b || len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '.' {
			x = '_'
		}
		if y == '.' {
			y = '_'
		}
		if x != y {
			return false
		}
	}
	return true
}
