package schemaregistry

import "testing"

// FuzzParseSchemaRequest: any body gives a schema or a Confluent error, and
// the canonical form of an accepted schema is a fixed point (parsing it
// again gives it back), so equal schemas keep matching after a restart.
func FuzzParseSchemaRequest(f *testing.F) {
	for _, s := range []string{userV1, userAddDef, userSpaced, orderSchema, `"int"`, `["null","string"]`,
		`{"type":"enum","name":"e","symbols":["A","B"],"default":"A"}`,
		`{"type":"fixed","name":"f","size":16,"logicalType":"decimal","precision":4}`,
		`{"type":"array","items":{"type":"map","values":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}}`,
		`{"type":"record","name":"n","fields":[{"name":"next","type":["null","n"],"default":null}]}`,
		`{"type":"record","name":"a.b","aliases":["c"],"doc":"d","fields":[{"name":"x","type":"int","aliases":["y"],"order":"descending","custom":{"k":[1,2]}}]}`,
	} {
		f.Add(schemaBody(s))
	}
	f.Add([]byte(`{"schema":"\"int\"","schemaType":"PROTOBUF"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ps, aerr := parseSchemaRequest(body)
		if aerr != nil {
			if aerr.status() >= 500 || aerr.message == "" {
				t.Fatalf("error %d %q", aerr.code, aerr.message)
			}
			return
		}
		again, err := parseAvro(ps.canonical)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", ps.canonical, err)
		}
		if again.canonical != ps.canonical {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s", ps.canonical, again.canonical)
		}
	})
}
