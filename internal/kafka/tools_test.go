package kafka

import (
	"bufio"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseFormat(t *testing.T) {
	r := &kgo.Record{
		Topic: "t", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte("v\x00x"),
		Timestamp: time.UnixMilli(1700000000123),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}},
	}
	for _, c := range []struct{ format, want string }{
		{"", "v\x00x\n"},
		{"value", "v\x00x\n"},
		{"kv", "k\tv\x00x\n"},
		{`%t/%p/%o %k=%v\n`, "t/2/41 k=v\x00x\n"},
		{`%T %K %S %h %%\r\\\0`, "1700000000123 1 3 a=1,b=2 %\r\\\x00"},
		{"plain", "plain"},
		{"json", `{"topic":"t","partition":2,"offset":41,"timestamp":1700000000123,"key":"k","value":"v\u0000x","headers":{"a":"1","b":"2"}}` + "\n"},
	} {
		f, err := ParseFormat(c.format)
		if err != nil {
			t.Fatalf("ParseFormat(%q): %v", c.format, err)
		}
		if got := string(f.Format(nil, r)); got != c.want {
			t.Errorf("format %q: got %q, want %q", c.format, got, c.want)
		}
	}
	bin := &kgo.Record{Value: []byte{0xff, 0xfe}}
	f, _ := ParseFormat("json")
	if got := string(f.Format(nil, bin)); !strings.Contains(got, `"value_base64":"//4="`) || strings.Contains(got, `"key"`) {
		t.Errorf("binary value as json: %s", got)
	}
	for _, bad := range []string{"%", `\`, "%x", `\q`} {
		if _, err := ParseFormat(bad); !errors.Is(err, ErrBadInput) {
			t.Errorf("ParseFormat(%q) = %v, want ErrBadInput", bad, err)
		}
	}
}

func TestParseFrom(t *testing.T) {
	for in, want := range map[string]int64{"earliest": -2, "": -2, "latest": -1, "17": 17, "0": 0} {
		o, err := ParseFrom(in)
		if err != nil || o.EpochOffset().Offset != want {
			t.Errorf("ParseFrom(%q) = %v, %v; want offset %d", in, o.EpochOffset(), err, want)
		}
	}
	for _, bad := range []string{"-1", "yesterday", "1.5"} {
		if _, err := ParseFrom(bad); !errors.Is(err, ErrBadInput) {
			t.Errorf("ParseFrom(%q) = %v, want ErrBadInput", bad, err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, c := range []string{"none", "gzip", "snappy", "lz4", "zstd", "ZSTD", ""} {
		if _, err := ParseCompression(c); err != nil {
			t.Errorf("ParseCompression(%q): %v", c, err)
		}
	}
	if _, err := ParseCompression("brotli"); !errors.Is(err, ErrBadInput) {
		t.Errorf("brotli: %v", err)
	}
	for in, idem := range map[string]bool{"all": true, "-1": true, "1": false, "0": false} {
		_, gotIdem, err := ParseAcks(in)
		if err != nil || gotIdem != idem {
			t.Errorf("ParseAcks(%q) idempotent=%v err=%v", in, gotIdem, err)
		}
	}
	if _, _, err := ParseAcks("2"); !errors.Is(err, ErrBadInput) {
		t.Errorf("acks 2: %v", err)
	}
	seeds, err := SplitBootstrap(" a:1, b:2 ,")
	if err != nil || len(seeds) != 2 || seeds[1] != "b:2" {
		t.Errorf("SplitBootstrap = %v, %v", seeds, err)
	}
	if s, _ := SplitBootstrap(""); len(s) != 1 || s[0] != DefaultBootstrap {
		t.Errorf("empty bootstrap = %v, want the default", s)
	}
	for _, bad := range []string{"host", "host:", ":9092x", "h:70000"} {
		if _, err := SplitBootstrap(bad); !errors.Is(err, ErrBadInput) {
			t.Errorf("SplitBootstrap(%q) = %v, want ErrBadInput", bad, err)
		}
	}
	cfg, err := ParseConfigs([]string{"retention.ms=1", "cleanup.policy=compact,delete", "x="})
	if err != nil || cfg["retention.ms"] != "1" || cfg["cleanup.policy"] != "compact,delete" || cfg["x"] != "" {
		t.Errorf("ParseConfigs = %v, %v", cfg, err)
	}
	if _, err := ParseConfigs([]string{"novalue"}); !errors.Is(err, ErrBadInput) {
		t.Errorf("ParseConfigs(novalue) = %v", err)
	}
}

func TestBenchResultLine(t *testing.T) {
	r := BenchResult{Records: 1000, Bytes: 1 << 20, Elapsed: 2 * time.Second, AvgMs: 1.5, MaxMs: 9, P50Ms: 1, P95Ms: 2, P99Ms: 3, P999Ms: 4, Produced: true}
	want := "1000 records sent, 500.0 records/sec (0.50 MB/sec), 1.50 ms avg latency, 9.00 ms max latency, 1.00 ms 50th, 2.00 ms 95th, 3.00 ms 99th, 4.00 ms 99.9th."
	if got := r.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	r.Produced = false
	if got := r.String(); !strings.HasPrefix(got, "1000 records received, 500.0 records/sec (0.50 MB/sec)") {
		t.Errorf("consumer line %s", got)
	}
}

func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{"%k\\t%v\\n", "json", "%", "\\", "%%%t"} {
		f.Add(s)
	}
	r := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v")}
	f.Fuzz(func(t *testing.T, s string) {
		fm, err := ParseFormat(s)
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("error %v does not wrap ErrBadInput", err)
			}
			return
		}
		_ = fm.Format(nil, r)
	})
}

func TestScanLFKeepsCarriageReturns(t *testing.T) {
	sc := bufio.NewScanner(strings.NewReader("a\r\n\nb\rc\nlast"))
	sc.Split(scanLF)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if want := []string{"a\r", "", "b\rc", "last"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	var vals []int64
	for i := int64(1); i <= 100000; i++ {
		v := i * 7 % 250000 // spread up to 250 ms
		h.record(v)
		vals = append(vals, v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.95, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))]
		got := h.percentile(q)
		if got > exact || float64(exact-got) > float64(exact)/64+1 {
			t.Errorf("p%v = %d, exact %d: off by more than one bucket", q*100, got, exact)
		}
	}
	for v := int64(0); v < 1<<20; v = v*3/2 + 1 {
		if lb := lowerBound(bucketOf(v)); lb > v || (v >= 64 && float64(v-lb) > float64(v)/64+1) {
			t.Fatalf("value %d in bucket %d with lower bound %d", v, bucketOf(v), lb)
		}
	}
	if h.max != vals[len(vals)-1] || h.n != 100000 {
		t.Errorf("max %d n %d", h.max, h.n)
	}
}
