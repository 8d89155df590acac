package security

import (
	"fmt"
	"regexp"
	"strings"
)

// Anonymous is the principal of a connection that did not authenticate
// (PLAINTEXT, or SSL without a client certificate), as in Kafka.
const Anonymous = "User:ANONYMOUS"

// principalRule is one entry of ssl.principal.mapping.rules.
type principalRule struct {
	def         bool // DEFAULT: the distinguished name unchanged
	pattern     *regexp.Regexp
	replacement string
	fold        byte // 'L' lower case, 'U' upper case, 0 as is
}

// ParsePrincipalRules parses Kafka's ssl.principal.mapping.rules: a comma
// separated list of RULE:pattern/replacement/[LU] and DEFAULT, tried in
// order; the first rule whose pattern matches the whole distinguished name
// gives the principal name. Patterns are Go regular expressions (RE2: no
// look-around); $1 in a replacement is the first group, as in Java. An
// empty value is DEFAULT alone.
func ParsePrincipalRules(s string) ([]principalRule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []principalRule{{def: true}}, nil
	}
	var rules []principalRule
	for s != "" {
		s = strings.TrimLeft(s, " ,\n\t")
		if s == "" {
			break
		}
		if strings.HasPrefix(s, "DEFAULT") {
			rules = append(rules, principalRule{def: true})
			s = s[len("DEFAULT"):]
			continue
		}
		if !strings.HasPrefix(s, "RULE:") {
			return nil, fmt.Errorf("%w: ssl.principal.mapping.rules: expected RULE: or DEFAULT at %q", ErrConfig, s)
		}
		s = s[len("RULE:"):]
		pat, rest, ok := strings.Cut(s, "/")
		if !ok {
			return nil, fmt.Errorf("%w: ssl.principal.mapping.rules: RULE:%s has no replacement (RULE:pattern/replacement/)", ErrConfig, s)
		}
		repl, rest, ok := strings.Cut(rest, "/")
		if !ok {
			return nil, fmt.Errorf("%w: ssl.principal.mapping.rules: RULE:%s/%s is not closed with /", ErrConfig, pat, repl)
		}
		r := principalRule{replacement: javaReplacement(repl)}
		if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
			r.fold, rest = rest[0], rest[1:]
		}
		re, err := regexp.Compile("^(?:" + pat + ")$")
		if err != nil {
			return nil, fmt.Errorf("%w: ssl.principal.mapping.rules: pattern %q: %v", ErrConfig, pat, err)
		}
		r.pattern = re
		rules = append(rules, r)
		s = rest
	}
	return rules, nil
}

var javaGroup = regexp.MustCompile(`\$(\d+)`)

// javaReplacement turns Java's $1 into Go's ${1}.
func javaReplacement(s string) string { return javaGroup.ReplaceAllString(s, "$${$1}") }

// MapPrincipal applies rules to a distinguished name (RFC 2253 order, as
// Go's pkix.Name.String and Java's X500Principal.getName give it); with no
// rule matching, the name is unchanged (Kafka's DEFAULT).
func MapPrincipal(rules []principalRule, dn string) string {
	for _, r := range rules {
		if r.def {
			return dn
		}
		if !r.pattern.MatchString(dn) {
			continue
		}
		out := r.pattern.ReplaceAllString(dn, r.replacement)
		switch r.fold {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		return out
	}
	return dn
}
