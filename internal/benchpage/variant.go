package benchpage

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/pyfloat"
)

// Variant returns page with its sample values moved as k scrapes later would move them, and its
// lines, names, labels and layout unchanged: counters (and the _count and _sum of summaries)
// grow by k times a rate of their own, histogram buckets grow by k times per-bucket observation
// rates so that they stay cumulative and _count stays equal to the +Inf bucket, and gauges take a
// value that depends on k. _created samples, timestamps, comments and values that are not
// finite numbers are kept. So successive k give successive scrapes of one target, and a
// benchmark or load server never serves the same bytes twice while the page's shape stays put.
// Types come from the page's TYPE lines; a sample without one is a gauge.
func Variant(page []byte, k int) []byte {
	lines := bytes.SplitAfter(page, []byte("\n"))
	types := map[string]string{}
	samples := make([]sampleLine, len(lines))
	// Histogram series are keyed by name and labels without le; their buckets' increments are
	// cumulative in le order, which needs all of a series' buckets first.
	type bucketRef struct {
		line int
		le   float64
	}
	buckets := map[string][]bucketRef{}
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("# TYPE ")) {
			if f := strings.Fields(string(l[len("# TYPE "):])); len(f) == 2 {
				types[f[0]] = f[1]
			}
			continue
		}
		s, ok := splitSample(l)
		if !ok {
			continue
		}
		s.role = role(types, s.name)
		if s.role == roleBucket {
			le, ok := s.le()
			if !ok {
				s.role = roleKeep
			} else {
				key := s.seriesKey("_bucket")
				buckets[key] = append(buckets[key], bucketRef{i, le})
			}
		}
		samples[i] = s
	}
	kf := float64(k)
	// inc is the increment of each bucket line; total, a series' +Inf increment.
	inc := map[int]float64{}
	total := map[string]float64{}
	for key, bs := range buckets {
		slices.SortStableFunc(bs, func(a, b bucketRef) int { return cmp.Compare(a.le, b.le) })
		var cum float64
		for _, b := range bs {
			cum += kf * float64(mix(uint64(b.line), 0)%20)
			inc[b.line] = cum
		}
		total[key] = cum
	}
	var out []byte
	for i, l := range lines {
		s := samples[i]
		v, err := strconv.ParseFloat(string(s.value(l)), 64)
		if s.role == roleNone || s.role == roleKeep || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			out = append(out, l...)
			continue
		}
		switch s.role {
		case roleCounter:
			v += kf * float64(mix(uint64(i), 0)%1000)
		case roleBucket:
			v += inc[i]
		case roleCount:
			v += total[s.seriesKey("_count")]
		case roleSum:
			v = round3(v + total[s.seriesKey("_sum")]*0.25)
		case roleSummaryCount:
			v += kf * float64(mix(uint64(i), 0)%100)
		case roleSummarySum:
			v = round3(v + kf*float64(mix(uint64(i), 0)%100)*0.25)
		case roleGauge:
			v = gauge(v, mix(uint64(i), uint64(k)))
		}
		out = append(out, l[:s.valStart]...)
		out = pyfloat.AppendGo(out, v)
		out = append(out, l[s.valEnd:]...)
	}
	return out
}

// gauge gives a gauge's next value from its current one: a count stays a count, a fraction a
// fraction.
func gauge(v float64, h uint64) float64 {
	frac := float64(h>>11) / (1 << 53)
	switch {
	case v >= 0 && v == math.Trunc(v) && v < 1<<50:
		return float64(h % uint64(2*v+10))
	case v >= 0 && v <= 1:
		return round3(frac)
	default:
		return round3(v * (0.5 + frac))
	}
}

// mix is a fixed hash of two numbers (splitmix64's finaliser).
func mix(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 + b + 0x632be59bd9b4e5f5
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

type sampleRole uint8

const (
	roleNone sampleRole = iota // not a sample line
	roleKeep
	roleGauge
	roleCounter
	roleBucket
	roleCount
	roleSum
	roleSummaryCount
	roleSummarySum
)

// role tells what a sample is from the TYPE of its family.
func role(types map[string]string, name string) sampleRole {
	// A _created sample is kept whatever its family's TYPE says: prometheus_client types a
	// counter's _created as a gauge family of its own (its counter's TYPE names the _total), and
	// a _created that moves reads as the engine's restart.
	if base, ok := strings.CutSuffix(name, "_created"); ok && (types[base] != "" || types[base+"_total"] == "counter") {
		return roleKeep
	}
	for _, s := range []struct {
		suffix string
		typ    string
		role   sampleRole
	}{
		{"_bucket", "histogram", roleBucket}, {"_count", "histogram", roleCount}, {"_sum", "histogram", roleSum},
		{"_total", "counter", roleCounter}, {"_count", "summary", roleSummaryCount}, {"_sum", "summary", roleSummarySum},
	} {
		if base, ok := strings.CutSuffix(name, s.suffix); ok && types[base] == s.typ {
			return s.role
		}
	}
	switch types[name] {
	case "counter":
		return roleCounter
	case "histogram", "summary":
		return roleKeep // a bucket or quantile line of an unusual spelling
	}
	return roleGauge
}

// sampleLine locates the parts of a sample line.
type sampleLine struct {
	role             sampleRole
	name             string
	labels           string // between the braces
	valStart, valEnd int
}

func (s sampleLine) value(l []byte) []byte { return l[s.valStart:s.valEnd] }

// splitSample finds a sample line's name, label set and value; ok is false for comments, blank
// lines and lines it cannot read (which Variant keeps as they are).
func splitSample(l []byte) (s sampleLine, ok bool) {
	i := 0
	for i < len(l) && l[i] != '{' && l[i] != ' ' && l[i] != '\t' && l[i] != '\n' {
		i++
	}
	if i == 0 || l[0] == '#' {
		return s, false
	}
	s.name = string(l[:i])
	if i < len(l) && l[i] == '{' {
		j := i + 1
		for quoted := false; j < len(l) && (quoted || l[j] != '}'); j++ {
			switch {
			case l[j] == '\\' && quoted:
				j++
			case l[j] == '"':
				quoted = !quoted
			}
		}
		if j >= len(l) {
			return s, false
		}
		s.labels = string(l[i+1 : j])
		i = j + 1
	}
	for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
		i++
	}
	s.valStart = i
	for i < len(l) && l[i] != ' ' && l[i] != '\t' && l[i] != '\n' {
		i++
	}
	s.valEnd = i
	return s, s.valEnd > s.valStart
}

// pairs splits a label set into its name="value" pairs.
func (s sampleLine) pairs() []string {
	var out []string
	rest := s.labels
	for rest != "" {
		j := 0
		for quoted := false; j < len(rest) && (quoted || rest[j] != ','); j++ {
			switch {
			case rest[j] == '\\' && quoted:
				j++
			case rest[j] == '"':
				quoted = !quoted
			}
		}
		if p := strings.TrimSpace(rest[:min(j, len(rest))]); p != "" {
			out = append(out, p)
		}
		if j >= len(rest) {
			break
		}
		rest = rest[j+1:]
	}
	return out
}

// le returns the bucket bound of a bucket line.
func (s sampleLine) le() (float64, bool) {
	for _, p := range s.pairs() {
		if v, ok := strings.CutPrefix(p, "le="); ok {
			f, err := strconv.ParseFloat(strings.Trim(strings.TrimSpace(v), `"`), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// seriesKey names a histogram series: its family and its labels other than le.
func (s sampleLine) seriesKey(suffix string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(s.name, suffix))
	for _, p := range s.pairs() {
		if !strings.HasPrefix(p, "le=") {
			b.WriteByte(0)
			b.WriteString(p)
		}
	}
	return b.String()
}
