// Package window turns successive scrapes of an inference engine (vLLM's, SGLang's) into
// windowed values: gauge samples, counter increases that survive engine restarts, and histogram
// bucket increases.
//
// It is pure logic: no clock, no I/O. The step package pools its output per training step.
package window

import (
	"strings"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The families vllmstat reads are described in package vllm; window numbers them the same way.
type (
	Gauge   = vllm.Gauge
	Counter = vllm.Counter
	Hist    = vllm.Hist
)

// The families, in key order.
const (
	Running         = vllm.Running
	Waiting         = vllm.Waiting
	KVUsage         = vllm.KVUsage
	WaitingByReason = vllm.WaitingByReason // split by reason
	SleepState      = vllm.SleepState      // split by sleep_state
	UsedTokens      = vllm.UsedTokens
	GenThroughput   = vllm.GenThroughput
	SpecAcceptLen   = vllm.SpecAcceptLength
	SpecAcceptRate  = vllm.SpecAcceptRate
	PausedReqs      = vllm.PausedReqs
	NumGauges       = vllm.NumGauges

	PrefixQueries      = vllm.PrefixQueries
	PrefixHits         = vllm.PrefixHits
	Preemptions        = vllm.Preemptions
	PromptTokens       = vllm.PromptTokens
	GenerationTokens   = vllm.GenerationTokens
	RequestSuccess     = vllm.RequestSuccess // split by finished_reason
	ExternalQueries    = vllm.ExternalQueries
	ExternalHits       = vllm.ExternalHits
	MMQueries          = vllm.MMQueries
	MMHits             = vllm.MMHits
	SpecDrafts         = vllm.SpecDrafts
	SpecDraftTokens    = vllm.SpecDraftTokens
	SpecAccepted       = vllm.SpecAccepted
	SpecAcceptedPerPos = vllm.SpecAcceptedPerPos // split by position
	Corrupted          = vllm.Corrupted
	CachedTokens       = vllm.CachedTokens
	NumRequests        = vllm.NumRequests
	AbortedRequests    = vllm.AbortedRequests
	RealtimeTokens     = vllm.RealtimeTokens // split by mode
	NumCounters        = vllm.NumCounters

	TTFT              = vllm.TTFT
	ITL               = vllm.ITL
	E2E               = vllm.E2E
	QueueTime         = vllm.QueueTime
	PrefillKVComputed = vllm.PrefillKVComputed
	NumHists          = vllm.NumHists
)

// Names used in metric keys (vLLM's current family names without the "vllm:" prefix).
var (
	GaugeNames   = names(vllm.Gauges[:])
	CounterNames = names(vllm.Counters[:])
	HistNames    = names(vllm.Hists[:])
)

func names(fs []vllm.Family) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

type kind uint8

const (
	kGauge kind = iota
	kCounter
	kHist
)

type role uint8

const (
	rValue role = iota // gauge value, counter value
	rCreated
	rBucket
	rSum
	rCount
)

// meta describes one exact sample name. rank orders one engine's spellings of one family: per
// page, engine and family, only the spelling with the lowest rank present is read. group ties a
// _created sample to the value samples of the same spelling.
type meta struct {
	kind  kind
	fam   int
	eng   vllm.Engine
	role  role
	rank  int
	group int
	split string // the family's split label, whose value a series keeps as its Reason
}

// slot numbers the meta's family and engine among the families of its kind, for the choice of
// spellings.
func (m *meta) slot() int { return int(m.eng)*numFams[m.kind] + m.fam }

// numFams is the number of families of each kind.
var numFams = [3]int{kGauge: int(NumGauges), kCounter: int(NumCounters), kHist: int(NumHists)}

// nameTable lists every exact sample name vllmstat reads, in a fixed order.
type nameTable struct {
	names []string
	metas []meta
}

func (t *nameTable) add(name string, m meta) {
	t.names = append(t.names, name)
	t.metas = append(t.metas, m)
}

// buildNames lists the names of every engine's spellings, vLLM's first (in the order they had
// before there was another engine).
func buildNames() *nameTable {
	t := &nameTable{}
	for e := range vllm.NumEngines {
		prefixes := vllm.Engines[e].Namespaces
		for g, f := range vllm.Gauges {
			for i, base := range f.Spellings(e) {
				for j, p := range prefixes {
					grp := i*len(prefixes) + j
					t.add(p+base, meta{kind: kGauge, fam: g, eng: e, role: rValue, rank: grp, group: grp, split: f.Split})
				}
			}
		}
		for c, f := range vllm.Counters {
			for i, base := range f.Spellings(e) {
				for j, p := range prefixes {
					grp := i*len(prefixes) + j
					t.add(p+base+"_total", meta{kind: kCounter, fam: c, eng: e, role: rValue, rank: 2 * grp, group: grp, split: f.Split})
					t.add(p+base+"_created", meta{kind: kCounter, fam: c, eng: e, role: rCreated, rank: 2 * grp, group: grp})
					if strings.HasPrefix(p, "ray_") {
						// Some Ray versions export counters without _total, typed gauge.
						t.add(p+base, meta{kind: kCounter, fam: c, eng: e, role: rValue, rank: 2*grp + 1, group: grp, split: f.Split})
					}
				}
			}
		}
		for h, f := range vllm.Hists {
			for i, base := range f.Spellings(e) {
				for j, p := range prefixes {
					grp := i*len(prefixes) + j
					for _, s := range histSuffixes {
						t.add(p+base+s.suffix, meta{kind: kHist, fam: h, eng: e, role: s.role, rank: grp, group: grp})
					}
				}
			}
		}
	}
	return t
}

var histSuffixes = []struct {
	suffix string
	role   role
}{{"_bucket", rBucket}, {"_sum", rSum}, {"_count", rCount}, {"_created", rCreated}}
