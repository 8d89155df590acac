package config

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// ParseProperties parses a Java-style .properties file: one key=value (or
// key: value, or key value) per line, '#' and '!' start comments, a trailing
// backslash continues a line. Later keys override earlier ones. Errors name
// the line.
func ParseProperties(data []byte) (map[string]string, error) {
	out := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	lineNo := 0
	var pending strings.Builder
	startLine := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if pending.Len() == 0 {
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
			startLine = lineNo
		}
		if cont := strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`); cont {
			pending.WriteString(line[:len(line)-1])
			continue
		}
		pending.WriteString(line)
		full := pending.String()
		pending.Reset()
		key, value, err := splitProperty(full)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrInvalid, startLine, err)
		}
		out[key] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrInvalid, lineNo+1, err)
	}
	if pending.Len() > 0 {
		key, value, err := splitProperty(pending.String())
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrInvalid, startLine, err)
		}
		out[key] = value
	}
	return out, nil
}

func splitProperty(line string) (string, string, error) {
	i := strings.IndexAny(line, "=: \t")
	if i < 0 {
		return strings.TrimSpace(line), "", nil
	}
	key := strings.TrimSpace(line[:i])
	rest := strings.TrimLeft(line[i:], " \t")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = rest[1:]
	}
	if key == "" {
		return "", "", fmt.Errorf("empty key in %q", line)
	}
	return key, strings.TrimSpace(rest), nil
}
