package writers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/writers/format"
)

// pageViewGen makes realistic, deterministic page views for the benchmark:
// a seeded generator (same seed, same records) of visits by ~1M users in
// sessions of ~5 views, 5,000 of them open at a time. A session keeps its user, device, user agent and country (the
// schema has no IP column);
// its first view has an external referrer (or none), later views refer to
// the previous page. URLs come from a few thousand paths with query
// strings, user agents from a few hundred, ts is milliseconds that
// increase at ~5,000 views/s with up to 2 s of jitter (events arrive a
// little out of order), status is mostly 200 with 3xx/4xx/5xx, latency and
// size are log-normal.
type pageViewGen struct {
	r        *rand.Rand
	users    *rand.Zipf
	paths    *rand.Zipf
	agents   *rand.Zipf
	sessions []pvSession
	clock    time.Time
}

type pvSession struct {
	id, country, device, agent, last string
	user                             int64
	bot                              bool
}

const (
	pvUsers    = 1_000_000
	pvProducts = 3000
	pvLive     = 5000 // concurrent sessions
)

var (
	pvCategories = []string{"shoes", "shirts", "jackets", "bags", "watches", "kitchen", "garden", "toys",
		"books", "music", "phones", "laptops", "cameras", "audio", "sports", "outdoor", "beauty", "health",
		"baby", "pets", "office", "tools", "auto", "games"}
	pvTerms = []string{"running+shoes", "red+dress", "usb+c+cable", "winter+jacket", "coffee+maker",
		"headphones", "gift+for+dad", "yoga+mat", "phone+case", "backpack", "lego", "air+fryer",
		"desk+lamp", "sneakers", "smart+watch", "sale", "linen+shirt", "tent", "kettle", "ssd+1tb"}
	pvSources = []string{"google", "bing", "newsletter", "facebook", "instagram", "affiliate", "tiktok"}
	pvExtRefs = []string{"https://www.google.com/", "https://www.bing.com/search?q=", "https://duckduckgo.com/",
		"https://www.facebook.com/", "https://t.co/", "https://www.instagram.com/", "https://news.ycombinator.com/item?id=",
		"https://www.reddit.com/r/", "https://mail.example.net/", "https://www.pinterest.com/pin/"}
	pvCountries = []string{"US", "US", "US", "US", "DE", "DE", "GB", "GB", "FR", "FR", "IN", "IN", "BR", "JP",
		"CA", "ES", "IT", "NL", "PL", "SE", "MX", "AU", "KR", "TR", "CH", "AT", "BE", "DK", "NO", "IE"}
	pvBots = []string{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
		"Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
		"Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)"}
)

func newPageViewGen(seed uint64) *pageViewGen {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &pageViewGen{
		r:      r,
		users:  rand.NewZipf(r, 1.05, 8, pvUsers-1),
		paths:  rand.NewZipf(r, 1.1, 4, pvProducts-1),
		agents: rand.NewZipf(r, 1.2, 2, uint64(len(pvAgents)-1)),
		clock:  t0,
	}
	g.sessions = make([]pvSession, pvLive)
	for i := range g.sessions {
		g.sessions[i] = g.newSession()
	}
	return g
}

// pvAgents is a few hundred user agents: browser versions × platforms.
var pvAgents = func() []string {
	platforms := []string{"Windows NT 10.0; Win64; x64", "Macintosh; Intel Mac OS X 10_15_7",
		"X11; Linux x86_64", "Linux; Android 14; Pixel 8", "Linux; Android 13; SM-S918B",
		"Linux; Android 12; Redmi Note 11", "iPhone; CPU iPhone OS 17_4 like Mac OS X",
		"iPad; CPU OS 16_6 like Mac OS X", "Windows NT 10.0; WOW64", "X11; CrOS x86_64 14541.0.0"}
	var out []string
	for v := 100; v < 126; v++ {
		for _, p := range platforms {
			out = append(out, fmt.Sprintf("Mozilla/5.0 (%s) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.%d.%d Safari/537.36",
				p, v, 5000+v*37, v%200))
		}
	}
	for v := 110; v < 128; v++ {
		for _, p := range platforms[:3] {
			out = append(out, fmt.Sprintf("Mozilla/5.0 (%s; rv:%d.0) Gecko/20100101 Firefox/%d.0", p, v, v))
		}
	}
	for v := 15; v < 18; v++ {
		for _, p := range platforms[6:8] {
			out = append(out, fmt.Sprintf("Mozilla/5.0 (%s) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/%d.%d Mobile/15E148 Safari/604.1", p, v, v%4))
		}
	}
	return out
}()

func (g *pageViewGen) newSession() pvSession {
	r := g.r
	s := pvSession{
		id:      fmt.Sprintf("%016x", r.Uint64()),
		user:    g.user(),
		country: pvCountries[r.IntN(len(pvCountries))],
	}
	if r.IntN(100) < 3 {
		s.bot = true
		s.agent = pvBots[r.IntN(len(pvBots))]
		s.device = "bot"
		return s
	}
	s.agent = pvAgents[g.agents.Uint64()]
	switch {
	case r.IntN(100) < 55:
		s.device = "mobile"
	case r.IntN(100) < 85:
		s.device = "desktop"
	default:
		s.device = "tablet"
	}
	if r.IntN(100) < 35 {
		switch r.IntN(4) {
		case 0, 1:
			s.last = pvExtRefs[r.IntN(len(pvExtRefs))] + strconv.Itoa(r.IntN(100000))
		default:
			s.last = pvExtRefs[r.IntN(len(pvExtRefs))]
		}
	}
	return s
}

// user is mostly any of the 1M users, sometimes one of the frequent ones.
func (g *pageViewGen) user() int64 {
	if g.r.IntN(100) < 80 {
		return 1 + g.r.Int64N(pvUsers)
	}
	return int64(g.users.Uint64()*2654435761%pvUsers) + 1
}

func (g *pageViewGen) url() string {
	r := g.r
	const host = "https://shop.example"
	var p string
	switch k := r.IntN(100); {
	case k < 55:
		p = "/product/" + strconv.Itoa(int(g.paths.Uint64())+10000)
	case k < 75:
		c := pvCategories[r.IntN(len(pvCategories))]
		p = "/c/" + c + "?page=" + strconv.Itoa(1+r.IntN(12)) + "&sort=" + []string{"price", "popular", "new"}[r.IntN(3)]
	case k < 88:
		p = "/search?q=" + pvTerms[r.IntN(len(pvTerms))]
	case k < 93:
		p = "/cart"
	case k < 96:
		p = "/checkout/step-" + strconv.Itoa(1+r.IntN(4))
	default:
		p = "/"
	}
	if r.IntN(100) < 15 {
		sep := "?"
		if len(p) > 0 && containsByte(p, '?') {
			sep = "&"
		}
		p += sep + "utm_source=" + pvSources[r.IntN(len(pvSources))] + "&utm_campaign=c" + strconv.Itoa(r.IntN(400))
	}
	return host + p
}

func containsByte(s string, c byte) bool {
	for i := range len(s) {
		if s[i] == c {
			return true
		}
	}
	return false
}

func (g *pageViewGen) status() int32 {
	switch k := g.r.IntN(1000); {
	case k < 925:
		return 200
	case k < 955:
		return 304
	case k < 965:
		return 301
	case k < 975:
		return 302
	case k < 993:
		return 404
	case k < 997:
		return 500
	default:
		return 503
	}
}

// next returns the next page view and its broker timestamp (the view's
// ts plus a few ms to seconds of delivery delay).
func (g *pageViewGen) next() (map[string]any, time.Time) {
	r := g.r
	g.clock = g.clock.Add(time.Duration(r.ExpFloat64() * float64(200*time.Microsecond)))
	ts := g.clock.Add(-time.Duration(r.IntN(2000)) * time.Millisecond).Truncate(time.Millisecond)
	si := r.IntN(len(g.sessions))
	if r.IntN(100) < 20 {
		g.sessions[si] = g.newSession()
	}
	s := &g.sessions[si]
	u := g.url()
	var ref any
	if s.last != "" {
		ref = s.last
	}
	s.last = u
	st := g.status()
	lat := math.Round(math.Exp(3.6+0.9*r.NormFloat64())*1000) / 1000
	size := int64(math.Exp(9.8 + 1.1*r.NormFloat64()))
	switch st {
	case 304, 301, 302:
		size = int64(150 + r.IntN(300))
	case 404, 500, 503:
		size = int64(800 + r.IntN(2000))
	}
	v := map[string]any{
		"ts":         ts,
		"user_id":    s.user,
		"session_id": s.id,
		"url":        u,
		"referrer":   ref,
		"status":     st,
		"latency_ms": lat,
		"country":    s.country,
		"device":     s.device,
		"user_agent": s.agent,
		"bytes_sent": size,
		"is_bot":     s.bot,
	}
	return v, g.clock.Add(time.Duration(5+r.IntN(500)) * time.Millisecond).Truncate(time.Millisecond)
}

// benchPageViews returns n generated page views and their Meta (offsets
// 0..n-1, topic and partition left to the writer).
func benchPageViews(n int) ([]map[string]any, []format.Meta) {
	g := newPageViewGen(42)
	recs := make([]map[string]any, n)
	metas := make([]format.Meta, n)
	for i := range recs {
		var ts time.Time
		recs[i], ts = g.next()
		metas[i] = format.Meta{Offset: int64(i), Timestamp: ts}
	}
	return recs, metas
}
