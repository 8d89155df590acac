package kafka

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxPropertiesFile bounds a client properties file.
const maxPropertiesFile = 1 << 20

// ReadClientProperties reads a Kafka client properties file (the
// --command-config of Kafka's tools) and returns the Security it describes;
// see ParseClientProperties.
func ReadClientProperties(path string) (Security, error) {
	f, err := os.Open(path)
	if err != nil {
		return Security{}, badInput("--command-config: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPropertiesFile+1))
	if err != nil {
		return Security{}, badInput("--command-config: %v", err)
	}
	if len(b) > maxPropertiesFile {
		return Security{}, badInput("--command-config: %s is larger than %d bytes", path, maxPropertiesFile)
	}
	sec, err := ParseClientProperties(string(b))
	if err != nil {
		return Security{}, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return sec, nil
}

// ParseClientProperties turns Kafka client properties into a Security:
//
//	security.protocol                        PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
//	sasl.mechanism                           PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
//	sasl.jaas.config                         ...PlainLoginModule or ...ScramLoginModule required username="u" password="p";
//	ssl.truststore.location, .type=PEM       the CA file
//	ssl.keystore.location, .type=PEM         one file with the client's key and certificate chain
//	ssl.endpoint.identification.algorithm=   (empty) check the chain but not the host name
//
// Key stores of type JKS or PKCS12, encrypted PEM keys (ssl.key.password)
// and login modules other than PLAIN and SCRAM are refused by name; other
// client settings (client.id, timeouts, ...) are ignored.
func ParseClientProperties(text string) (Security, error) {
	props, err := parseProperties(text)
	if err != nil {
		return Security{}, err
	}
	var sec Security
	sec.Protocol = props["security.protocol"]
	sec.Mechanism = props["sasl.mechanism"]
	if jaas, ok := props["sasl.jaas.config"]; ok {
		module, opts, err := parseJAAS(jaas)
		if err != nil {
			return Security{}, badInput("sasl.jaas.config: %v", err)
		}
		switch module {
		case "org.apache.kafka.common.security.plain.PlainLoginModule",
			"org.apache.kafka.common.security.scram.ScramLoginModule":
		default:
			return Security{}, badInput("sasl.jaas.config: login module %s is not supported (PlainLoginModule or ScramLoginModule)", module)
		}
		sec.Username = opts["username"]
		sec.Password = Secret(opts["password"])
	}
	for _, store := range []string{"ssl.truststore", "ssl.keystore"} {
		if t := strings.ToUpper(props[store+".type"]); t != "" && t != "PEM" {
			return Security{}, badInput("%s.type %s is not supported: export it to PEM (keytool -exportcert -rfc, openssl pkcs12 -nodes) and set %s.type=PEM", store, t, store)
		}
		for _, inline := range []string{".certificates", ".certificate.chain", ".key"} {
			if _, ok := props[store+inline]; ok {
				return Security{}, badInput("%s%s is not supported: put the PEM in a file named by %s.location", store, inline, store)
			}
		}
	}
	if _, ok := props["ssl.key.password"]; ok {
		return Security{}, badInput("ssl.key.password: encrypted private keys are not supported; decrypt the key (openssl pkcs8 -nocrypt)")
	}
	sec.CA = props["ssl.truststore.location"]
	if ks := props["ssl.keystore.location"]; ks != "" {
		sec.Cert, sec.Key = ks, ks
	}
	if alg, ok := props["ssl.endpoint.identification.algorithm"]; ok {
		switch strings.ToLower(alg) {
		case "":
			sec.SkipHostnameVerification = true
		case "https":
		default:
			return Security{}, badInput("ssl.endpoint.identification.algorithm %q: want https or empty", alg)
		}
	}
	for _, k := range []string{"sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "sasl.kerberos.service.name"} {
		if _, ok := props[k]; ok {
			return Security{}, badInput("%s is not supported (SASL PLAIN and SCRAM only)", k)
		}
	}
	if err := sec.Check(); err != nil {
		return Security{}, Named(err, propertyName)
	}
	return sec, nil
}

// propertyName names a field by its client property.
func propertyName(f SecurityField) string {
	switch f {
	case FieldProtocol:
		return "security.protocol"
	case FieldMechanism:
		return "sasl.mechanism"
	case FieldUsername, FieldPassword:
		return "sasl.jaas.config"
	case FieldCA:
		return "ssl.truststore.location"
	case FieldCert, FieldKey:
		return "ssl.keystore.location"
	}
	return string(f)
}

// parseProperties reads Java properties: key=value, key: value or
// key value lines, # and ! comments, a trailing backslash continuing a
// line, and the escapes \t \n \r \\ and a backslash before any other
// character standing for it.
func parseProperties(text string) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), maxPropertiesFile)
	var logical strings.Builder
	lineNo, start := 0, 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if logical.Len() == 0 {
			line = strings.TrimLeft(line, " \t\f")
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
			start = lineNo
		} else {
			line = strings.TrimLeft(line, " \t\f")
		}
		if trailingBackslashes(line)%2 == 1 {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v := splitProperty(logical.String())
		logical.Reset()
		if k == "" {
			return nil, badInput("line %d: no key", start)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, badInput("%v", err)
	}
	if logical.Len() > 0 {
		k, v := splitProperty(logical.String())
		props[k] = v
	}
	return props, nil
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitProperty cuts a logical line at the first unescaped '=', ':' or
// white space, and unescapes both sides.
func splitProperty(line string) (string, string) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	if i > len(line) {
		i = len(line)
	}
	key := unescapeProperty(line[:i])
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, strings.TrimRight(unescapeProperty(rest), " \t")
}

func unescapeProperty(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i == len(s)-1 {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// parseJAAS reads one JAAS login module entry: `Module flag key="value"
// key=value ... ;` (Kafka's sasl.jaas.config).
func parseJAAS(s string) (module string, opts map[string]string, err error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(s, ";")
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return "", nil, fmt.Errorf("want `LoginModule required username=\"...\" password=\"...\";`")
	}
	module = fields[0]
	switch strings.ToLower(fields[1]) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, fmt.Errorf("%q after the login module is not a control flag (required)", fields[1])
	}
	rest := strings.TrimSpace(s[strings.Index(s, fields[1])+len(fields[1]):])
	opts = map[string]string{}
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return "", nil, fmt.Errorf("option %q is not key=value", rest)
		}
		key := strings.TrimSpace(rest[:eq])
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return "", nil, fmt.Errorf("option %s: unterminated quote", key)
			}
			val, rest = b.String(), rest[i+1:]
		} else {
			end := strings.IndexAny(rest, " \t")
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		opts[key] = val
		rest = strings.TrimSpace(rest)
	}
	return module, opts, nil
}
