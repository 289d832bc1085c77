package page

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Options shape how a page is parsed.
type Options struct {
	Limits
	// WorkerLabels name the labels that, with engine, tell a page's workers apart: Ray's
	// metrics agent serves several engines of one node on one page, each replica with
	// engine="0", told apart only by its ReplicaId and WorkerId. A worker is the page's target,
	// its engine label and the values of these labels that its samples carry; a label a sample
	// lacks adds nothing, so pages without them are split by engine alone. Like engine, these
	// labels are left out of the series keys, so that a worker's series line up across scrapes.
	//
	// nil means DefaultWorkerLabels; an empty, non-nil list means none (workers are told apart
	// by engine alone).
	WorkerLabels []string
}

// defaultWorkerLabels is DefaultWorkerLabels' value, never handed out.
var defaultWorkerLabels = []string{"ReplicaId", "WorkerId"}

// DefaultWorkerLabels returns the worker labels used when none are configured: Ray's
// ReplicaId (Ray Serve replicas) and WorkerId (the Ray worker process).
func DefaultWorkerLabels() []string { return slices.Clone(defaultWorkerLabels) }

// reserved labels have a meaning of their own for the families vllmstat reads.
var reserved = []string{"engine", "le", "finished_reason", "__name__"}

// CheckWorkerLabels reports the first problem of a list of worker labels: a name that is not a
// Prometheus label name, one of the labels vllmstat reads itself, or a name given twice.
func CheckWorkerLabels(names []string) error {
	for i, n := range names {
		switch {
		case !validLabelName(n):
			return fmt.Errorf("%q is not a label name (letters, digits and _, not starting with a digit)", n)
		case slices.Contains(reserved, n):
			return fmt.Errorf("%q cannot be a worker label: vllmstat reads it itself", n)
		case slices.Contains(names[:i], n):
			return fmt.Errorf("%q is given twice", n)
		}
	}
	return nil
}

func validLabelName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// LabelMap decodes a worker's labels key (EnginePage.Labels) into a map; "" gives nil. A key that
// is not one ParsePage made gives nil too.
func LabelMap(key string) map[string]string {
	if key == "" {
		return nil
	}
	m := map[string]string{}
	for s := key; s != ""; {
		name, rest, ok := strings.Cut(s, `="`)
		if !ok || name == "" {
			return nil
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			c := rest[i]
			if c == '\\' && i+1 < len(rest) {
				i++
				c = rest[i]
				if c == 'n' {
					c = '\n'
				}
			}
			v.WriteByte(c)
		}
		if i == len(rest) {
			return nil
		}
		m[name] = v.String()
		s = rest[i+1:]
		if s != "" {
			if s[0] != ',' {
				return nil
			}
			s = s[1:]
		}
	}
	return m
}

// LabelKey encodes labels as ParsePage keys them (EnginePage.Labels): the inverse of LabelMap.
func LabelKey(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	kv := make([]string, 0, 2*len(labels))
	for _, n := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, n, labels[n])
	}
	return string(appendKey(nil, kv))
}

// WorkerAddrLabel is the label SGLang's router adds to every sample of its merged page, naming
// the server the sample came from.
const WorkerAddrLabel = "worker_addr"

// WorkerAddr returns the worker_addr of a worker's labels key, "" when it has none. Most keys
// have none: they are not decoded.
func WorkerAddr(key string) string {
	if !strings.Contains(key, WorkerAddrLabel+`="`) {
		return ""
	}
	return LabelMap(key)[WorkerAddrLabel]
}
