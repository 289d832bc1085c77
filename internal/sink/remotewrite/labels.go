package remotewrite

import (
	"maps"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/step"
)

// exportedPrefix renames a target label whose name vllmstat's own labels use, as Prometheus
// renames a scraped label that clashes with a target label (honor_labels: false): a file_sd
// label "target" arrives as "exported_target", and never replaces the worker's target URL.
const exportedPrefix = "exported_"

// targetLabels returns a target's labels (file_sd's "labels") as series labels, sorted by
// name. A name that a per-worker series uses itself (promname.ReservedLabels, __name__, an
// extra label) gets exportedPrefix; one that is taken even so is left out.
func (w *Writer) targetLabels(tl map[string]string) []promname.Label {
	if len(tl) == 0 {
		return nil
	}
	taken := func(name string) bool {
		return strings.HasPrefix(name, "__") || slices.Contains(promname.ReservedLabels, name) ||
			slices.ContainsFunc(w.set.ExtraLabels, func(l promname.Label) bool { return l.Name == name })
	}
	out := make([]promname.Label, 0, len(tl))
	for _, name := range slices.Sorted(maps.Keys(tl)) {
		n := name
		if taken(n) {
			n = exportedPrefix + name
			if _, own := tl[n]; own || taken(n) {
				continue
			}
		}
		out = append(out, promname.Label{Name: n, Value: tl[name]})
	}
	return out
}

// labelsKey spells labels for the interval series cache, so that a target whose labels change
// gets new series.
func labelsKey(ls []promname.Label) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Name)
		b.WriteByte('=')
		b.WriteString(l.Value)
		b.WriteByte('\xff')
	}
	return b.String()
}

// withLabels returns labels followed by more, leaving labels' array alone (its owner reuses it).
func withLabels(labels, more []promname.Label) []promname.Label {
	if len(more) == 0 {
		return labels
	}
	return append(slices.Clip(labels), more...)
}

// stepTargetLabels maps each labelled target of r's per_worker records to its series labels;
// nil when none has labels.
func (w *Writer) stepTargetLabels(r *step.Record) map[string][]promname.Label {
	var out map[string][]promname.Label
	for i := range r.PerWorker {
		pw := &r.PerWorker[i]
		if len(pw.TargetLabels) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]promname.Label{}
		}
		if _, ok := out[pw.Target]; !ok {
			out[pw.Target] = w.targetLabels(pw.TargetLabels)
		}
	}
	return out
}

// targetOf returns the value of the target label, "" without one.
func targetOf(labels []promname.Label) string {
	for _, l := range labels {
		if l.Name == "target" {
			return l.Value
		}
	}
	return ""
}
