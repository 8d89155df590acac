package schemaregistry

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

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
	f.Add([]byte(`{"schema":"syntax = \"proto3\"; message M { int32 a = 1; }","schemaType":"PROTOBUF"}`))
	f.Add([]byte(`{"schema":"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}","schemaType":"JSON"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sub, aerr := parseSchemaRequest(body)
		if aerr != nil {
			if aerr.status() >= 500 || aerr.message == "" {
				t.Fatalf("error %d %q", aerr.code, aerr.message)
			}
			return
		}
		if len(sub.references) > 0 {
			return // resolved against a state: FuzzApplyRecords
		}
		ps, err := parseTyped(context.Background(), sub, nil, 0)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status() >= 500 || ae.message == "" {
				t.Fatalf("parse error %v", err)
			}
			return
		}
		again, err := parseTyped(context.Background(), submission{schemaType: sub.schemaType, text: ps.canonical}, nil, 0)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", ps.canonical, err)
		}
		if again.canonical != ps.canonical || again.key != ps.key {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s", ps.canonical, again.canonical)
		}
	})
}

// FuzzApplyRecords applies arbitrary records, as anyone able to produce to
// the topic could write them: no panic, and the state's invariants hold.
// The input is records separated by 0xff, each key and value separated by
// 0xfe (no 0xfe: a tombstone).
func FuzzApplyRecords(f *testing.F) {
	seed := func(recs ...logRecord) []byte {
		var out []byte
		for _, r := range recs {
			k, v, _ := r.encode()
			out = append(out, k...)
			if v != nil {
				out = append(out, 0xfe)
				out = append(out, v...)
			}
			out = append(out, 0xff)
		}
		return out
	}
	x := `{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}`
	f.Add(seed(
		logRecord{schemaKey("s", 1, "n1"), schemaValue{Subject: "s", Version: 1, ID: 1, Schema: x}},
		logRecord{schemaKey("t", 1, "n2"), schemaValue{Subject: "t", Version: 1, ID: 1, Schema: x}},
		logRecord{schemaKey("s", 2, "n3"), schemaValue{Subject: "s", Version: 2, ID: 1, Schema: `"int"`}},
		logRecord{deleteVersionKey("s", 1, "n1", "d1"), deleteVersionValue{Subject: "s", Version: 1, Nonce: "n1"}},
		logRecord{idKey(1), idValue{ID: 1, Fingerprint: "ab"}},
		logRecord{key: schemaKey("s", 1, "n1")},
		logRecord{configKey(""), configValue{Level: LevelFull}},
		logRecord{key: configKey("s")},
	))
	f.Add([]byte(`{"keytype":"SCHEMA","subject":"s","version":1,"nonce":"n","magic":1}` + "\xfe" + `{"subject":"s","version":1,"id":-5,"schema":"\"int\""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st := newState()
		for _, rec := range bytes.Split(data, []byte{0xff}) {
			k, v, hasValue := bytes.Cut(rec, []byte{0xfe})
			key, err := decodeKey(k)
			if err != nil {
				continue
			}
			if !hasValue {
				v = nil
			}
			st.apply(key, v)
		}
		checkInvariants(t, st)
	})
}
