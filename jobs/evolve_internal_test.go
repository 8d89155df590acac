package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// The merge's rules, version after version of one subject: what is
// admitted, and the field and reason of what is refused.
func TestEvolutionRules(t *testing.T) {
	rec := func(fields string) avro.Schema {
		return avro.MustParse(`{"type":"record","name":"r","fields":[` + fields + `]}`)
	}
	base := `{"name":"id","type":"long"},{"name":"n","type":"int"},{"name":"s","type":"string"},` +
		`{"name":"sub","type":{"type":"record","name":"sub","fields":[{"name":"a","type":"int"}]}},` +
		`{"name":"xs","type":{"type":"array","items":{"type":"record","name":"x","fields":[{"name":"q","type":"float"}]}}}`
	for _, c := range []struct {
		name, next string
		err        string // "" admitted
	}{
		{"same", base, ""},
		{"added with a default", base + `,{"name":"c","type":["null","string"],"default":null}`, ""},
		{"added nested with a default", strings.Replace(base, `{"name":"a","type":"int"}`, `{"name":"a","type":"int"},{"name":"b","type":"string","default":""}`, 1), ""},
		{"removed", `{"name":"id","type":"long"},{"name":"n","type":"int"}`, ""},
		{"widened", strings.Replace(strings.Replace(base, `"n","type":"int"`, `"n","type":"double"`, 1), `"q","type":"float"`, `"q","type":"double"`, 1), ""},
		{"made nullable", strings.Replace(base, `"s","type":"string"`, `"s","type":["null","string"],"default":null`, 1), ""},
		{"added without a default", base + `,{"name":"c","type":"string"}`, `field "c" is added without a default`},
		{"added nested without a default", strings.Replace(base, `{"name":"q","type":"float"}`, `{"name":"q","type":"float"},{"name":"r","type":"int"}`, 1), `field "xs[].r" is added without a default`},
		{"narrowed", strings.Replace(base, `"id","type":"long"`, `"id","type":"int"`, 1), `field "id" is narrowed from long to int`},
		{"narrowed nested", strings.Replace(base, `"q","type":"float"`, `"q","type":"int"`, 1), `field "xs[].q" is narrowed from float to int`},
		{"changed", strings.Replace(base, `"s","type":"string"`, `"s","type":"long"`, 1), `field "s" changes type from string to long`},
		{"record to string", strings.Replace(base, `{"type":"record","name":"sub","fields":[{"name":"a","type":"int"}]}`, `"string"`, 1), `field "sub" changes type from record to string`},
		{"logical type", strings.Replace(base, `"id","type":"long"`, `"id","type":{"type":"long","logicalType":"timestamp-millis"}`, 1), `field "id" changes type from long to long timestamp-millis`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e evolution
			if err := e.admit(sr.SubjectSchema{Subject: "t-value", Version: 1, ID: 1}, rec(base)); err != nil {
				t.Fatal(err)
			}
			err := e.admit(sr.SubjectSchema{Subject: "t-value", Version: 2, ID: 2}, rec(c.next))
			if c.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "subject t-value version 2 (schema id 2)") {
				t.Fatalf("got %v, want %q", err, c.err)
			}
			// refused: nothing merged, so the same schema is refused again
			if err := e.admit(sr.SubjectSchema{Subject: "t-value", Version: 2, ID: 2}, rec(c.next)); !errors.Is(err, ErrSchemaChange) {
				t.Fatalf("refused once, admitted the second time: %v", err)
			}
		})
	}
	// Widened then narrowed back is refused against the widest seen, and a
	// removed field that returns with another type too.
	var e evolution
	for i, s := range []string{base, strings.Replace(base, `"n","type":"int"`, `"n","type":"long"`, 1), `{"name":"id","type":"long"}`} {
		if err := e.admit(sr.SubjectSchema{ID: i + 1}, rec(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.admit(sr.SubjectSchema{ID: 9}, rec(`{"name":"id","type":"long"},{"name":"n","type":"int","default":0}`)); err == nil || !strings.Contains(err.Error(), `field "n" is narrowed from long to int`) {
		t.Fatalf("a removed field back narrower: %v", err)
	}
	if err := e.admit(sr.SubjectSchema{ID: 10}, rec(`{"name":"id","type":"long"},{"name":"s","type":"int","default":0}`)); err == nil || !strings.Contains(err.Error(), `field "s" changes type from string to int`) {
		t.Fatalf("a removed field back with another type: %v", err)
	}
	// Another subject's schemas merge with their own subject's only.
	if err := e.admit(sr.SubjectSchema{Subject: "other-value", Version: 1, ID: 11}, rec(`{"name":"id","type":"string"}`)); err != nil {
		t.Fatalf("another subject's first schema: %v", err)
	}
}
