package page

import (
	"strings"

	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// table holds every exact sample name vllmstat reads: every spelling of every family of package
// vllm's spec, for every engine, each with what it is (see meta). expo hands over only the
// samples of these names (tableSet).
var (
	table    = buildNames()
	tableSet = expo.NewNames(table.names)
)

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
	split string // the family's split (or parts) label, whose value a series keeps as its Reason
	// splitWith is a gauge's second split label: a series' Reason is then split's value, ":"
	// and this one's (see vllm.Family.SplitWith).
	splitWith string
	// parts is set when split is the label of a gauge's parts (vllm.Family.Parts): a sample
	// whose value of it is not "" is a part of the total whose value is "".
	parts bool
}

// slot numbers the meta's family and engine among the families of its kind, for the choice of
// spellings.
func (m *meta) slot() int { return int(m.eng)*numFams[m.kind] + m.fam }

// numFams is the number of families of each kind.
var numFams = [3]int{kGauge: int(vllm.NumGauges), kCounter: int(vllm.NumCounters), kHist: int(vllm.NumHists)}

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
					m := meta{kind: kGauge, fam: g, eng: e, role: rValue, rank: grp, group: grp, split: f.Split, splitWith: f.SplitWith}
					if f.Parts != "" {
						m.split, m.parts = f.Parts, true
					}
					t.add(p+base, m)
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
