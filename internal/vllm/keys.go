package vllm

import (
	"slices"
	"strings"
)

// Key joins a metric prefix, a family or derived metric name and the optional further parts (a
// label value, a statistic) into a step metric key: Key("vllm", "kv_cache_usage_perc", "p95")
// is "vllm/kv_cache_usage_perc/p95".
func Key(prefix, name string, parts ...string) string {
	n := len(prefix) + 1 + len(name)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	b.WriteByte('/')
	b.WriteString(name)
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(p)
	}
	return b.String()
}

// stats are the statistics of per-interval samples and histograms, the key suffixes that
// become a stat label in Prometheus names (as does WorstWorker).
var stats = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range IntervalStats {
		m[s] = true
	}
	for _, q := range HistQuantiles {
		m[q.Stat], m[q.Lo], m[q.Hi] = true, true, true
	}
	m[StatMean] = true
	return m
}()

// WorstWorker is the last part of a fleet-balance key that holds the worst worker's value
// (prefix_cache_hit_rate/worst_worker beside the fleet's prefix_cache_hit_rate).
const WorstWorker = "worst_worker"

// splitLabels maps the names that carry a split label to the Prometheus label name its value
// becomes: request_success's finished_reason is "reason", as in earlier releases. A family read
// for the ledger's states or for derived keys alone has no keys, so its labels name none.
var splitLabels = func() map[string]string {
	m := map[string]string{}
	for _, f := range allFamilies() {
		if f.Split == "" || f.StateOnly || !f.Total && !f.Scalars { // no key of its own
			continue
		}
		name := f.Split
		if name == "finished_reason" {
			name = "reason"
		}
		m[f.Name] = name
	}
	for _, r := range Ratios {
		if s := Counters[r.Num].Split; s != "" {
			m[r.Name] = s
		}
	}
	return m
}()

func allFamilies() []Family {
	var fs []Family
	fs = append(fs, Gauges[:]...)
	fs = append(fs, Counters[:]...)
	return append(fs, Hists[:]...)
}

// PromLabels lists the labels PromName may give a series: "stat" and the split labels'
// names, sorted after "stat".
func PromLabels() []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range splitLabels {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return append([]string{"stat"}, out...)
}

// Label is one label of a Prometheus series.
type Label struct {
	Name, Value string
}

// PromName maps a step metric key to a Prometheus family name part and the labels its further
// parts become: "vllm/kv_cache_usage_perc/p95" is ("vllm_kv_cache_usage_perc", stat="p95"),
// "sglang/kv_cache_usage_perc/p95" ("sglang_kv_cache_usage_perc", stat="p95"),
// "vllm/request_success/stop" is ("vllm_request_success", reason="stop"),
// "vllm/num_requests_waiting_by_reason/capacity/p95" is ("vllm_num_requests_waiting_by_reason",
// reason="capacity", stat="p95"), "vllm/prefix_cache_hit_rate" is ("vllm_prefix_cache_hit_rate",
// no labels). prefix is the run's metric prefix, which may itself contain "/". A key outside
// every engine's prefix (see EnginePrefix) is sanitized whole. The labels are appended to ls.
func PromName(prefix, key string, ls []Label) (string, []Label) {
	v, ok := ParseKey(prefix, key)
	if !ok {
		return Sanitize(key), ls
	}
	return v.PromName(prefix, ls)
}

// Sanitize turns a key into a valid metric name part: characters outside [a-zA-Z0-9_] become
// "_", and the abbreviated unit "s" (as in tokens_per_s) is spelled out, which promtool asks
// for.
func Sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	words := strings.Split(string(b), "_")
	for i, w := range words {
		if w == "s" {
			if i > 0 && words[i-1] == "per" {
				words[i] = "second"
			} else {
				words[i] = "seconds"
			}
		}
	}
	return strings.Join(words, "_")
}

// Series describes how a timeline series (a family or derived name without prefix) is
// labelled in plots.
type Series struct {
	Name, Title, Unit string
	Fraction          bool
}

// TimelineSeries lists the series a worker timeline may hold, in the order plots list them, each
// name once (two engines' ratios may share one).
func TimelineSeries() []Series {
	var out []Series
	seen := map[string]bool{}
	add := func(name, title, unit string, frac bool) {
		if !seen[name] {
			seen[name] = true
			out = append(out, Series{name, title, unit, frac})
		}
	}
	// Fractions (KV usage) first: they are the ones to look at.
	for _, frac := range []bool{true, false} {
		for _, f := range Gauges {
			if f.Timeline && f.Fraction == frac {
				add(f.Name, f.Title, f.Unit, f.Fraction)
			}
		}
	}
	for _, r := range Ratios {
		if r.Timeline {
			add(r.Name, r.Title, r.Unit, r.Fraction)
		}
	}
	for _, f := range Counters {
		if f.Timeline {
			add(f.Name, f.Title, f.Unit, f.Fraction)
		}
	}
	return out
}

// Group returns the report group of a key without its prefix and statistic (a chart name such
// as "prefix_cache_hit_rate" or "request_success"): the group of the family or derived metric
// its first part names, GroupOther for a name vllmstat does not derive from the spec.
func Group(chart string) string {
	name, _, _ := strings.Cut(chart, "/")
	return groups[name]
}

var groups = func() map[string]string {
	m := map[string]string{}
	for _, f := range allFamilies() {
		m[f.Name] = f.Group
	}
	for _, r := range Ratios {
		m[r.Name] = r.Group
	}
	for _, r := range Rates {
		m[r.Name()] = r.Group
	}
	for _, sm := range Sums {
		m[sm.Name] = sm.Group
	}
	for _, pt := range LabelParts {
		m[pt.Name] = pt.Group
	}
	for _, u := range Unfinisheds {
		m[u.Name] = u.Group
	}
	for _, sr := range SumRatios {
		m[sr.Name] = sr.Group
	}
	return m
}()

// KeyName is a name that step keys have after their prefix, and what may follow it.
type KeyName struct {
	Name string
	// Split is set when a split label's value follows the name ("request_success/stop").
	Split bool
	// Stats are the statistics a key of the name ends with, "" for the key without one.
	Stats []string
}

// KeyNames lists the names the spec gives step keys, as a step tracker makes them: a counter's
// total, the interval statistics of the families and ratios with Scalars, a histogram's
// quantiles and mean, the ratios and the rates; each name once (two engines' ratios share
// one), in the spec's order. The fleet-balance figures and the worst workers' values are the
// step tracker's own, not listed here.
func KeyNames() []KeyName {
	var out []KeyName
	at := map[string]int{}
	add := func(name string, split bool, stats ...string) {
		i, ok := at[name]
		if !ok {
			i = len(out)
			at[name] = i
			out = append(out, KeyName{Name: name, Split: split})
		}
		for _, s := range stats {
			if !slices.Contains(out[i].Stats, s) {
				out[i].Stats = append(out[i].Stats, s)
			}
		}
	}
	for _, f := range Gauges {
		if f.Scalars {
			add(f.Name, f.Split != "", IntervalStats...)
		}
	}
	for _, f := range Counters {
		if f.Total {
			add(f.Name, f.Split != "", "")
		}
		if f.Scalars && f.Split == "" {
			add(f.Name, false, IntervalStats...)
		}
	}
	for _, r := range Ratios {
		if Counters[r.Num].Split != "" {
			add(r.Name, true, "")
			continue
		}
		add(r.Name, false, "")
		if r.Scalars {
			add(r.Name, false, IntervalStats...)
		}
	}
	for _, r := range Rates {
		add(r.Name(), false, "")
	}
	for _, sm := range Sums {
		add(sm.Name, false, "")
	}
	for _, pt := range LabelParts {
		add(pt.Name, false, "")
	}
	for _, u := range Unfinisheds {
		add(u.Name, false, "")
	}
	for _, sr := range SumRatios {
		add(sr.Name, false, "")
	}
	for _, f := range Hists {
		stats := []string{}
		for _, q := range HistQuantiles {
			stats = append(stats, q.Stat, q.Lo, q.Hi)
		}
		add(f.Name, false, append(stats, StatMean)...)
	}
	return out
}
