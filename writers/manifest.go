package writers

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// Manifest errors.
var (
	// ErrTornManifest reports a manifest (or origin record) that exists but
	// is short, unparseable or fails its checksum: its writer died (or is
	// still writing it, on HDFS).
	ErrTornManifest = errors.New("writers: torn manifest")
	// ErrManifestVersion reports a manifest written by a newer sluice in a
	// version this one cannot read. Nothing is done to it: upgrade sluice.
	ErrManifestVersion = errors.New("writers: manifest version not supported")
)

// ManifestVersion is the envelope version written; readers refuse newer ones.
const ManifestVersion = 2

// Envelope magics: the first word of a manifest and of an origin record.
const (
	manifestMagic = "sluice-manifest"
	originMagic   = "sluice-origin"
	// maxHeader bounds the header line a reader looks for.
	maxHeader = 256
)

// Manifest is the commit record of one split: exactly one can exist per
// (topic, partition, start). Its existence is the commit.
type Manifest struct {
	Version   int       `json:"-"` // the envelope version it was read from
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Start     int64     `json:"start"` // first offset of the split (inclusive)
	End       int64     `json:"end"`   // end offset (exclusive): where the next split starts
	Attempt   string    `json:"attempt"`
	Committed time.Time `json:"committed"`
	Records   int64     `json:"records"`
	Files     []File    `json:"files"`
	// Audit holds the split's records counted per window of record time
	// (absent in manifests written before the audit).
	Audit *AuditCounts `json:"audit,omitempty"`
}

// File is one data file of a commit; paths are relative to the output root.
type File struct {
	Temp    string `json:"temp"`  // where the attempt wrote it
	Final   string `json:"final"` // where it lives once committed
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	First   int64  `json:"first_offset"`
	Last    int64  `json:"last_offset"`
	// Schema names the file's writer schema (absent in manifests written
	// before it, and for schemaless JSON lines).
	Schema *FileSchema `json:"schema,omitempty"`
}

// FileSchema is the schema of one data file: the registry's name of the
// records' writer schema (subject, version, id; zero when the schema is not
// the registry's) and the fingerprint of the file's own column schema (for
// Parquet, of its Arrow/Parquet schema; for Avro, of the Avro schema), so
// files of one fingerprint share their columns exactly.
type FileSchema struct {
	Subject     string `json:"subject,omitempty"`
	Version     int    `json:"version,omitempty"`
	ID          int    `json:"id,omitempty"`
	Fingerprint string `json:"fingerprint"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal wraps body in the envelope: one header line
//
//	<magic> <version> crc32c=<8 hex digits> len=<body bytes>\n
//
// then the body. The checksum covers the body's raw bytes.
func seal(magic string, body []byte) []byte {
	h := fmt.Sprintf("%s %d crc32c=%08x len=%d\n", magic, ManifestVersion, crc32.Checksum(body, castagnoli), len(body))
	return append([]byte(h), body...)
}

// open checks an envelope and returns its body. The version is read first:
// a newer one is ErrManifestVersion whatever follows (its layout may differ);
// anything short, malformed or failing the checksum is ErrTornManifest.
func open(magic string, b []byte) ([]byte, error) {
	if len(b) > 0 && b[0] == '{' {
		// The JSON-only layout of sluice before the envelope (version 1).
		return nil, fmt.Errorf("%w: version 1 (JSON without an envelope, written before the first release); this sluice reads version %d", ErrManifestVersion, ManifestVersion)
	}
	nl := bytes.IndexByte(b[:min(len(b), maxHeader)], '\n')
	if nl < 0 {
		return nil, fmt.Errorf("%w: no header line in %d bytes", ErrTornManifest, len(b))
	}
	f := strings.Fields(string(b[:nl]))
	if len(f) < 2 || f[0] != magic {
		return nil, fmt.Errorf("%w: header %q is not a %s", ErrTornManifest, b[:nl], magic)
	}
	v, err := strconv.Atoi(f[1])
	if err != nil || v < 1 {
		return nil, fmt.Errorf("%w: bad version in header %q", ErrTornManifest, b[:nl])
	}
	if v > ManifestVersion {
		return nil, fmt.Errorf("%w: version %d, this sluice reads up to %d: upgrade sluice", ErrManifestVersion, v, ManifestVersion)
	}
	if v < ManifestVersion || len(f) != 4 {
		return nil, fmt.Errorf("%w: header %q", ErrTornManifest, b[:nl])
	}
	sum, err1 := strconv.ParseUint(strings.TrimPrefix(f[2], "crc32c="), 16, 32)
	n, err2 := strconv.Atoi(strings.TrimPrefix(f[3], "len="))
	if err1 != nil || err2 != nil || !strings.HasPrefix(f[2], "crc32c=") || !strings.HasPrefix(f[3], "len=") {
		return nil, fmt.Errorf("%w: header %q", ErrTornManifest, b[:nl])
	}
	body := b[nl+1:]
	if len(body) != n {
		return nil, fmt.Errorf("%w: body of %d bytes, header says %d", ErrTornManifest, len(body), n)
	}
	if got := crc32.Checksum(body, castagnoli); uint64(got) != sum {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", ErrTornManifest, sum, got)
	}
	return body, nil
}

// Encode returns the manifest's bytes: the envelope around its JSON.
func (m *Manifest) Encode() ([]byte, error) {
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return seal(manifestMagic, append(body, '\n')), nil
}

// DecodeManifest verifies and parses a manifest. Its version is checked
// first (ErrManifestVersion: newer than this sluice reads); a short,
// malformed or checksum-failing one wraps ErrTornManifest. Fields this
// version does not know are ignored.
func DecodeManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := openJSON(manifestMagic, b, &m); err != nil {
		return nil, err
	}
	m.Version = ManifestVersion
	return &m, nil
}

// openJSON checks an envelope and parses its JSON body into v. A body that
// passed its checksum but does not parse was written so by some writer: it
// is not torn, and not for this version to touch.
func openJSON(magic string, b []byte, v any) error {
	body, err := open(magic, b)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s: checksum valid but the body does not parse: %v", ErrManifestVersion, magic, err)
	}
	return nil
}

// Origin is a partition's origin record: the start of its first split. It
// is created exclusively once and never changes.
type Origin struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Start     int64     `json:"start"`
	Created   time.Time `json:"created"`
}

func (o *Origin) encode() ([]byte, error) {
	body, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return seal(originMagic, append(body, '\n')), nil
}

func decodeOrigin(b []byte) (*Origin, error) {
	var o Origin
	if err := openJSON(originMagic, b, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Layout of the _sluice area of an output root.
const (
	SluiceDir    = "_sluice"
	commitsDir   = "_sluice/commits"
	tmpDir       = "_sluice/tmp"
	withdrawnDir = "_sluice/withdrawn"
	tornDir      = "_sluice/torn"
	originName   = "origin"
)

func partDir(base, topic string, partition int32) string {
	return path.Join(base, topic, strconv.Itoa(int(partition)))
}

// ManifestPath is _sluice/commits/<topic>/<partition>/<start %020d>.json.
func ManifestPath(topic string, partition int32, start int64) string {
	return path.Join(partDir(commitsDir, topic, partition), fmt.Sprintf("%020d.json", start))
}

// OriginPath is _sluice/commits/<topic>/<partition>/origin.
func OriginPath(topic string, partition int32) string {
	return path.Join(partDir(commitsDir, topic, partition), originName)
}

func attemptDir(topic string, partition int32, start int64, attempt string) string {
	return path.Join(partDir(tmpDir, topic, partition), fmt.Sprintf("%020d", start), attempt)
}

// describeFile makes a file's FileSchema: describe's registry names plus
// the fingerprint of the file's columns (a format writer that knows its own
// column schema says it; otherwise the Avro schema's fingerprint fp).
func describeFile(describe func(avro.Schema) *FileSchema, schema avro.Schema, fw any, fp [32]byte) *FileSchema {
	ref := &FileSchema{}
	if describe != nil {
		if d := describe(schema); d != nil {
			*ref = *d
		}
	}
	if c, ok := fw.(interface{ ColumnsFingerprint() string }); ok {
		ref.Fingerprint = c.ColumnsFingerprint()
	} else {
		ref.Fingerprint = "avro:" + hex.EncodeToString(fp[:8])
	}
	return ref
}
