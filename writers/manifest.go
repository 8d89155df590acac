package writers

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"strconv"
	"time"
)

// Manifest errors.
var (
	// ErrTornManifest reports a manifest that exists but does not parse or
	// whose checksum does not match: its writer died (or is still writing).
	ErrTornManifest = errors.New("writers: torn manifest")
)

// ManifestVersion is the version written; readers reject newer ones.
const ManifestVersion = 1

// Manifest is the commit record of one split: exactly one can exist per
// (topic, partition, start). Its existence is the commit.
type Manifest struct {
	Version   int       `json:"version"`
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Start     int64     `json:"start"` // first offset of the split (inclusive)
	End       int64     `json:"end"`   // end offset (exclusive): where the next split starts
	Attempt   string    `json:"attempt"`
	Committed time.Time `json:"committed"`
	Records   int64     `json:"records"`
	Files     []File    `json:"files"`
	Checksum  string    `json:"checksum"` // CRC-32C of the manifest with this field empty
}

// File is one data file of a commit; paths are relative to the output root.
type File struct {
	Temp    string `json:"temp"`  // where the attempt wrote it
	Final   string `json:"final"` // where it lives once committed
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	First   int64  `json:"first_offset"`
	Last    int64  `json:"last_offset"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the manifest's bytes with its checksum set.
func (m *Manifest) Encode() ([]byte, error) {
	c := *m
	c.Checksum = ""
	body, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	c.Checksum = strconv.FormatUint(uint64(crc32.Checksum(body, castagnoli)), 16)
	m.Checksum = c.Checksum
	return json.MarshalIndent(&c, "", "  ")
}

// DecodeManifest parses and verifies a manifest. A short, unparseable or
// checksum-failing manifest is an error wrapping ErrTornManifest.
func DecodeManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTornManifest, err)
	}
	want := m.Checksum
	c := m
	c.Checksum = ""
	body, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	if got := strconv.FormatUint(uint64(crc32.Checksum(body, castagnoli)), 16); got != want {
		return nil, fmt.Errorf("%w: checksum %q, computed %q", ErrTornManifest, want, got)
	}
	if m.Version < 1 || m.Version > ManifestVersion {
		return nil, fmt.Errorf("writers: manifest version %d is not supported (this sluice reads up to %d)", m.Version, ManifestVersion)
	}
	return &m, nil
}

// Layout of the _sluice area of an output root.
const (
	SluiceDir    = "_sluice"
	commitsDir   = "_sluice/commits"
	tmpDir       = "_sluice/tmp"
	withdrawnDir = "_sluice/withdrawn"
	tornDir      = "_sluice/torn"
)

func partDir(base, topic string, partition int32) string {
	return path.Join(base, topic, strconv.Itoa(int(partition)))
}

// ManifestPath is _sluice/commits/<topic>/<partition>/<start %020d>.json.
func ManifestPath(topic string, partition int32, start int64) string {
	return path.Join(partDir(commitsDir, topic, partition), fmt.Sprintf("%020d.json", start))
}

func attemptDir(topic string, partition int32, start int64, attempt string) string {
	return path.Join(partDir(tmpDir, topic, partition), fmt.Sprintf("%020d", start), attempt)
}
