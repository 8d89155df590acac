package schemaregistry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// wideRecord is a record of n long fields (31 bytes each), plus an
// optional string field with a default when extra is set: the issue's
// 15,000-field schema is wideRecord(15000, …), 465 KB.
func wideRecord(n int, extra bool) string {
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"Wide","fields":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"f%05d","type":"long"}`, i)
	}
	if extra {
		b.WriteString(`,{"name":"extra","type":["null","string"],"default":null}`)
	}
	b.WriteString("]}")
	return b.String()
}

func mustParse(t testing.TB, text string) parsedSchema {
	t.Helper()
	ps, err := parseAvro(text)
	if err != nil {
		t.Fatalf("%s: %v", abbreviate(text, 100), err)
	}
	return ps
}

// TestCompatibilityCheckerMatchesAvro: the registry's checker gives
// hamba/avro's verdict and message on every ordered pair of a corpus that
// covers each rule (fields, defaults and aliases, promotions, unions on
// either side, enums, fixed, arrays, maps, named references, recursion).
func TestCompatibilityCheckerMatchesAvro(t *testing.T) {
	corpus := []string{
		`"int"`, `"long"`, `"float"`, `"double"`, `"string"`, `"bytes"`, `"boolean"`, `"null"`,
		`["null","int"]`, `["null","long"]`, `["int","string"]`, `["null","string","long"]`,
		`{"type":"array","items":"int"}`, `{"type":"array","items":"long"}`, `{"type":"array","items":["null","string"]}`,
		`{"type":"map","values":"int"}`, `{"type":"map","values":"double"}`,
		`{"type":"fixed","name":"F","size":4}`, `{"type":"fixed","name":"F","size":8}`, `{"type":"fixed","name":"G","size":4}`,
		`{"type":"fixed","name":"G","size":4,"aliases":["F"]}`,
		`{"type":"enum","name":"E","symbols":["A","B"]}`, `{"type":"enum","name":"E","symbols":["A","B","C"]}`,
		`{"type":"enum","name":"E","symbols":["A"],"default":"A"}`, `{"type":"enum","name":"X","symbols":["A","B"]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"string"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"int","default":0}]}`,
		`{"type":"record","name":"r","fields":[]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":""}]}`,
		`{"type":"record","name":"r","fields":[{"name":"z","type":"int","aliases":["a"]}]}`,
		`{"type":"record","name":"r","fields":[{"name":"b","type":"string"},{"name":"a","type":"int","aliases":["b"]}]}`,
		`{"type":"record","name":"r","fields":[{"name":"a","type":["null","int"],"default":null}]}`,
		`{"type":"record","name":"s","fields":[{"name":"a","type":"int"}]}`,
		`{"type":"record","name":"s","aliases":["r"],"fields":[{"name":"a","type":"int"}]}`,
		`{"type":"record","name":"ns.r","fields":[{"name":"a","type":"int"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},{"name":"e2","type":"E"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},{"name":"e2","type":"E"}]}`,
		`{"type":"record","name":"r","fields":[{"name":"in","type":{"type":"record","name":"i","fields":[{"name":"x","type":"int"}]}}]}`,
		`{"type":"record","name":"r","fields":[{"name":"in","type":{"type":"record","name":"i","fields":[{"name":"x","type":"double"}]}}]}`,
		`{"type":"record","name":"r","fields":[{"name":"in","type":["null",{"type":"record","name":"i","fields":[{"name":"x","type":"int"}]}],"default":null}]}`,
		`{"type":"record","name":"node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","node"],"default":null}]}`,
		`{"type":"record","name":"node","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","node"],"default":null}]}`,
		`{"type":"record","name":"node","fields":[{"name":"v","type":"string"},{"name":"next","type":["null","node"]}]}`,
		`[{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]},{"type":"record","name":"s","fields":[]}]`,
		`["null",{"type":"map","values":"int"},{"type":"array","items":"int"}]`,
		`{"type":"string","logicalType":"uuid"}`, `{"type":"int","logicalType":"date"}`,
	}
	schemas := make([]parsedSchema, len(corpus))
	for i, text := range corpus {
		schemas[i] = mustParse(t, text)
	}
	compared, incompatible := 0, 0
	for _, reader := range schemas {
		for _, writer := range schemas {
			want := avro.NewSchemaCompatibility().Compatible(reader.avro, writer.avro)
			got := avroCompatible(reader, writer, newCheckBudget(DefaultMaxCheckSteps))
			if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
				t.Errorf("reader %s, writer %s: got %v, hamba/avro says %v", reader.canonical, writer.canonical, got, want)
			}
			compared++
			if want != nil {
				incompatible++
			}
		}
	}
	if incompatible == 0 || incompatible == compared {
		t.Fatalf("the corpus is one-sided: %d of %d pairs incompatible", incompatible, compared)
	}
}

// TestCompatibilityCheckBounded: checking the 15,000-field record
// against one version in both directions is well within the default bound;
// a check that needs more than its budget (200 versions of it,
// FULL_TRANSITIVE: about 18 million steps, against a budget of one million)
// stops once the budget is spent and answers the bound.
func TestCompatibilityCheckBounded(t *testing.T) {
	old, next := mustParse(t, wideRecord(15000, false)), mustParse(t, wideRecord(15000, true))
	budget := newCheckBudget(DefaultMaxCheckSteps)
	if reasons, err := checkCompatible(LevelFull, next, []parsedSchema{old}, budget); err != nil || len(reasons) > 0 {
		t.Fatalf("15,000 fields against one version: %v %v", reasons, err)
	}
	if spent := budget.limit - budget.left; spent > DefaultMaxCheckSteps/50 {
		t.Fatalf("15,000 fields against one version took %d steps", spent)
	}
	history := make([]parsedSchema, 200)
	for i := range history {
		history[i] = old
	}
	budget = newCheckBudget(1_000_000)
	reasons, err := checkCompatible(LevelFullTransitive, next, history, budget)
	if !errors.Is(err, errCheckBound) || reasons != nil {
		t.Fatalf("200 versions of 15,000 fields: %v %v, want the bound", reasons, err)
	}
	if budget.left != -1 {
		t.Fatalf("budget left %d after the bound", budget.left)
	}
	aerr := checkBoundError("wide", LevelFullTransitive, len(history), budget)
	if aerr.code != codeInvalidSchema || !strings.Contains(aerr.message, "1000000 steps") || !strings.Contains(aerr.message, "200 version") {
		t.Fatalf("bound answer: %v", aerr)
	}
}

// BenchmarkCompatibilityWideRecord checks a 15,000-field record against
// its previous version in both directions.
func BenchmarkCompatibilityWideRecord(b *testing.B) {
	old, next := mustParse(b, wideRecord(15000, false)), mustParse(b, wideRecord(15000, true))
	for b.Loop() {
		if _, err := checkCompatible(LevelFull, next, []parsedSchema{old}, newCheckBudget(DefaultMaxCheckSteps)); err != nil {
			b.Fatal(err)
		}
	}
}
