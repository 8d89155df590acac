package quickstart

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Schema is the Avro schema of the quickstart's page views.
const Schema = `{
  "type": "record", "name": "PageView", "namespace": "sluice.quickstart",
  "fields": [
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "user_id", "type": "string"},
    {"name": "session_id", "type": "string"},
    {"name": "url", "type": "string"},
    {"name": "referrer", "type": "string"},
    {"name": "country", "type": "string"},
    {"name": "device", "type": "string"},
    {"name": "status", "type": "int"},
    {"name": "latency_ms", "type": "int"}
  ]
}`

var (
	pages = []string{"/", "/search", "/products/espresso-machine", "/products/grinder", "/products/kettle",
		"/products/milk-frother", "/products/scale", "/cart", "/checkout", "/account", "/blog/latte-art",
		"/blog/water-chemistry", "/help/shipping", "/help/returns", "/about"}
	referrers = []string{"", "", "", "https://www.google.com/", "https://duckduckgo.com/", "https://news.ycombinator.com/",
		"https://www.reddit.com/r/espresso/", "https://t.co/"}
	countries = []string{"US", "US", "US", "DE", "DE", "GB", "FR", "JP", "BR", "IN", "CA", "NL"}
	devices   = []string{"desktop", "desktop", "mobile", "mobile", "mobile", "tablet"}
)

// pageView is one generated event and the partition key it goes under.
type pageView struct {
	key   string
	value map[string]any
	at    time.Time
}

// generate makes n page views spread over [from, to): users browse in
// sessions of a few pages, pages follow a Zipf-like popularity, a few
// requests fail, latencies are log-normal. seed makes it reproducible.
func generate(n int, from, to time.Time, seed uint64) []pageView {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	zipf := rand.NewZipf(r, 1.3, 1, uint64(len(pages)-1))
	span := to.Sub(from)
	out := make([]pageView, 0, n)
	for len(out) < n {
		user := fmt.Sprintf("u%05d", r.IntN(5000))
		session := fmt.Sprintf("%s-%08x", user, r.Uint32())
		country, device := countries[r.IntN(len(countries))], devices[r.IntN(len(devices))]
		at := from.Add(time.Duration(r.Int64N(int64(span))))
		ref := referrers[r.IntN(len(referrers))]
		for i, pagesInSession := 0, 1+r.IntN(6); i < pagesInSession && len(out) < n; i++ {
			if !at.Before(to) {
				break
			}
			status := 200
			switch x := r.IntN(1000); {
			case x < 15:
				status = 404
			case x < 20:
				status = 500
			}
			latency := int(math.Exp(3.6 + 0.6*r.NormFloat64()))
			out = append(out, pageView{key: user, at: at, value: map[string]any{
				"ts": at, "user_id": user, "session_id": session, "url": pages[zipf.Uint64()], "referrer": ref,
				"country": country, "device": device, "status": status, "latency_ms": latency,
			}})
			ref = ""
			at = at.Add(time.Duration(5+r.IntN(90)) * time.Second)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// jsonLine renders a page view as one JSON object (ts as epoch millis).
func jsonLine(v map[string]any) []byte {
	c := make(map[string]any, len(v))
	for k, x := range v {
		if t, ok := x.(time.Time); ok {
			x = t.UnixMilli()
		}
		c[k] = x
	}
	b, _ := json.Marshal(c)
	return b
}
