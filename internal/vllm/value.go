package vllm

import "strings"

// Value is one number of a step record, by what it is rather than by its key: a family or
// derived metric (or a fleet-balance figure such as "fleet_busy_s"), the value of its split
// label if it has one, and the statistic ("" for a total or a plain figure). The flat key
// ("vllm/num_requests_waiting_by_reason/capacity/p95") is made from it only where records are
// written, by Key and Flat.
type Value struct {
	Name string
	// Label is the split label's value ("stop", "capacity", a draft position); "" for none.
	Label string
	// Stat is a statistic (StatMean, StatP95, ..., WorstWorker); "" for none.
	Stat string
	V    float64
	// Kind is the engine kind of the workers the value is of; its key begins with that
	// kind's prefix (see EnginePrefix).
	Kind Engine
}

// Key is v's step metric key in a run whose metric prefix is prefix:
// enginePrefix/name[/label][/stat], where enginePrefix is EnginePrefix(prefix, v.Kind).
func (v Value) Key(prefix string) string {
	prefix = EnginePrefix(prefix, v.Kind)
	switch {
	case v.Label != "" && v.Stat != "":
		return Key(prefix, v.Name, v.Label, v.Stat)
	case v.Label != "":
		return Key(prefix, v.Name, v.Label)
	case v.Stat != "":
		return Key(prefix, v.Name, v.Stat)
	}
	return Key(prefix, v.Name)
}

// Flat maps values to their keys in a run whose metric prefix is prefix, the metrics of a step
// record's JSON line.
func Flat(prefix string, vs []Value) map[string]float64 {
	m := make(map[string]float64, len(vs))
	for _, v := range vs {
		m[v.Key(prefix)] = v.V
	}
	return m
}

// PromName is v's Prometheus family name part and its labels, appended to ls: the split
// label's value under the label's Prometheus name, then the statistic as "stat"
// (Value{Name: "request_success", Label: "stop"} is vllm_request_success{reason="stop"}).
func (v Value) PromName(prefix string, ls []Label) (string, []Label) {
	name := v.Name
	if v.Label != "" {
		if lbl, ok := splitLabels[v.Name]; ok {
			ls = append(ls, Label{lbl, v.Label})
		} else {
			name += "/" + v.Label
		}
	}
	if v.Stat != "" {
		ls = append(ls, Label{"stat", v.Stat})
	}
	return Sanitize(EnginePrefix(prefix, v.Kind)) + "_" + Sanitize(name), ls
}

// ParseKey takes a step metric key of a run whose metric prefix is prefix apart again, for
// records read back from their JSON lines, which carry only keys (see ParseName); the engine
// is the one whose prefix the key begins with. ok is false for a key outside every engine's
// prefix.
func ParseKey(prefix, key string) (v Value, ok bool) {
	for e := range NumEngines {
		if rest, ok := strings.CutPrefix(key, EnginePrefix(prefix, e)+"/"); ok {
			v = ParseName(rest)
			v.Kind = e
			return v, true
		}
	}
	return Value{}, false
}

// ParseName takes a step metric key without its prefix apart: the first part is the name, the
// next the label's value when the name has a split label, and a last part that names a
// statistic (or WorstWorker) the statistic. Further parts stay in the name.
func ParseName(rest string) Value {
	var v Value
	parts := strings.Split(rest, "/")
	if _, split := splitLabels[parts[0]]; split && len(parts) >= 2 {
		v.Label = parts[1]
		parts = append(parts[:1], parts[2:]...)
	}
	if n := len(parts); n >= 2 && (stats[parts[n-1]] || parts[n-1] == WorstWorker) {
		v.Stat = parts[n-1]
		parts = parts[:n-1]
	}
	v.Name = strings.Join(parts, "/")
	return v
}
