package kafka

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Formatter renders one consumed record.
type Formatter interface {
	// Format appends the rendering of r to dst.
	Format(dst []byte, r *kgo.Record) []byte
}

// ParseFormat compiles a --format value:
//
//	value            the value and a newline (the default)
//	kv               key, a tab, value, newline
//	json             one JSON object per record (key and value as strings
//	                 when valid UTF-8, else as key_base64 / value_base64)
//	anything else    a template: %t topic, %p partition, %o offset, %k key,
//	                 %v value, %T timestamp (Unix ms), %K key length,
//	                 %S value length, %h headers (k=v,k=v), %% percent;
//	                 escapes \n \t \r \\ and \0
func ParseFormat(s string) (Formatter, error) {
	switch s {
	case "", "value":
		return ParseFormat(`%v\n`)
	case "kv":
		return ParseFormat(`%k\t%v\n`)
	case "json":
		return jsonFormat{}, nil
	}
	var t template
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			t = append(t, piece{lit: lit})
			lit = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\', '%':
			if i+1 >= len(s) {
				return nil, badInput("format %q ends with a lone %q", s, string(c))
			}
			i++
			n := s[i]
			if c == '\\' {
				switch n {
				case 'n':
					lit = append(lit, '\n')
				case 't':
					lit = append(lit, '\t')
				case 'r':
					lit = append(lit, '\r')
				case '0':
					lit = append(lit, 0)
				case '\\':
					lit = append(lit, '\\')
				default:
					return nil, badInput("format %q has unknown escape \\%c", s, n)
				}
				continue
			}
			if n == '%' {
				lit = append(lit, '%')
				continue
			}
			if !bytes.ContainsRune([]byte("tpokvTKSh"), rune(n)) {
				return nil, badInput("format %q has unknown field %%%c (want one of %%t %%p %%o %%k %%v %%T %%K %%S %%h)", s, n)
			}
			flush()
			t = append(t, piece{field: n})
		default:
			lit = append(lit, c)
		}
	}
	flush()
	return t, nil
}

type piece struct {
	lit   []byte
	field byte
}

type template []piece

func (t template) Format(dst []byte, r *kgo.Record) []byte {
	for _, p := range t {
		switch p.field {
		case 0:
			dst = append(dst, p.lit...)
		case 't':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'k':
			dst = append(dst, r.Key...)
		case 'v':
			dst = append(dst, r.Value...)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'K':
			dst = strconv.AppendInt(dst, int64(len(r.Key)), 10)
		case 'S':
			dst = strconv.AppendInt(dst, int64(len(r.Value)), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst
}

type jsonFormat struct{}

type jsonRecord struct {
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Timestamp   int64             `json:"timestamp"`
	Key         *string           `json:"key,omitempty"`
	KeyBase64   string            `json:"key_base64,omitempty"`
	Value       *string           `json:"value,omitempty"`
	ValueBase64 string            `json:"value_base64,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

func textOrBase64(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

func (jsonFormat) Format(dst []byte, r *kgo.Record) []byte {
	j := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	j.Key, j.KeyBase64 = textOrBase64(r.Key)
	j.Value, j.ValueBase64 = textOrBase64(r.Value)
	if len(r.Headers) > 0 {
		j.Headers = make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			j.Headers[h.Key] = string(h.Value)
		}
	}
	b, _ := json.Marshal(j) // cannot fail: strings, numbers and a string map
	dst = append(dst, b...)
	return append(dst, '\n')
}

// writeAll writes b to w, for formatter output.
func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}
