package schemaregistry

import (
	"encoding/json"
	"fmt"
)

// Key types of the records in the _schemas topic (see doc.go).
const (
	keySchema        = "SCHEMA"
	keyDeleteVersion = "DELETE_VERSION"
	keyConfig        = "CONFIG"
	keyID            = "ID"
)

// recordKey is the JSON key of every _schemas record. Which fields are set
// depends on Type; encoding/json writes them in this order, so one key has
// one byte form (compaction compares bytes).
type recordKey struct {
	Type    string  `json:"keytype"`
	Subject *string `json:"subject,omitempty"`
	Version int     `json:"version,omitempty"`
	ID      int     `json:"id,omitempty"`
	Nonce   string  `json:"nonce,omitempty"`
	// Delete makes each soft delete's key its own (DELETE_VERSION only):
	// a second soft delete of one registration, written by an instance
	// with a stale view, must not replace the first one under compaction,
	// which would move the delete after a registration it let in. Records
	// written before it existed have none.
	Delete string `json:"delete,omitempty"`
	Magic  int    `json:"magic"`
}

// schemaValue is the value of a SCHEMA record: one registration.
type schemaValue struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	Type       string      `json:"schemaType,omitempty"` // empty = AVRO
	References []reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

// parseKey names the schema a SCHEMA record holds before it is parsed:
// its text, with its type and references when it is not plain Avro (what
// the reader's parsed schemas are keyed by).
func (v schemaValue) parseKey() string { return parseKey(v.Type, v.References, v.Schema) }

func parseKey(schemaType string, refs []reference, text string) string {
	if (schemaType == "" || schemaType == typeAvro) && len(refs) == 0 {
		return text
	}
	return schemaType + "\x00" + refsKey(refs) + "\x00" + text
}

// deleteVersionValue is the value of a DELETE_VERSION record: a soft delete.
type deleteVersionValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	Nonce   string `json:"nonce"`
}

// configValue is the value of a CONFIG record.
type configValue struct {
	Level string `json:"compatibilityLevel"`
}

// idValue is the value of an ID record: the id was used by the schema with
// this fingerprint (hex SHA-256 of its canonical text), so it is never
// handed out to another schema, even after its versions are gone.
type idValue struct {
	ID          int    `json:"id"`
	Fingerprint string `json:"fingerprint"`
}

func schemaKey(subject string, version int, nonce string) recordKey {
	return recordKey{Type: keySchema, Subject: &subject, Version: version, Nonce: nonce, Magic: 1}
}

func deleteVersionKey(subject string, version int, nonce, del string) recordKey {
	return recordKey{Type: keyDeleteVersion, Subject: &subject, Version: version, Nonce: nonce, Delete: del, Magic: 1}
}

// configKey is the key of a subject's config, or of the global one when
// subject is "".
func configKey(subject string) recordKey {
	k := recordKey{Type: keyConfig}
	if subject != "" {
		k.Subject = &subject
	}
	return k
}

func idKey(id int) recordKey { return recordKey{Type: keyID, ID: id} }

// logRecord is one record to write: a key and a JSON value, or a tombstone
// when value is nil.
type logRecord struct {
	key   recordKey
	value any
}

func (r logRecord) encode() (key, value []byte, err error) {
	if key, err = json.Marshal(r.key); err != nil {
		return nil, nil, err
	}
	if r.value != nil {
		if value, err = json.Marshal(r.value); err != nil {
			return nil, nil, err
		}
	}
	return key, value, nil
}

// decodeKey parses a record key; an error means a record this registry
// does not understand (it is skipped and counted, never fatal).
func decodeKey(b []byte) (recordKey, error) {
	var k recordKey
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("%w: record key %q: %v", ErrStore, abbreviate(string(b), 100), err)
	}
	return k, nil
}
