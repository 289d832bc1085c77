package promtext

import (
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/pyfloat"
)

// A small writer for the Prometheus text format exactly as Python's prometheus_client prints it
// (generate_latest): "# HELP" then "# TYPE" per family, labels sorted by name, values through
// appendGoFloat, and for counters and histograms a separate "_created" gauge family after the
// samples. client_golang is not used because it prints numbers, label order and _created
// differently, and the point of the simulator is a byte-for-byte vLLM page.

type label struct{ name, value string }

// labelSet collects up to a handful of labels and writes them sorted by name.
type LabelSet struct {
	l [8]label
	n int
}

func (s *LabelSet) Add(name, value string) {
	i := s.n
	s.n++
	for i > 0 && s.l[i-1].name > name {
		s.l[i] = s.l[i-1]
		i--
	}
	s.l[i] = label{name, value}
}

func AppendHelp(dst []byte, name, help, typ string) []byte {
	dst = append(dst, "# HELP "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	for i := 0; i < len(help); i++ {
		switch c := help[i]; c {
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		default:
			dst = append(dst, c)
		}
	}
	dst = append(dst, "\n# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, typ...)
	return append(dst, '\n')
}

// appendSample writes one sample line: name, suffix, the labels, and the value. le, if not
// empty, is added as the "le" label in its sorted place.
func AppendSample(dst []byte, name, suffix string, ls *LabelSet, le string, v float64) []byte {
	dst = append(dst, name...)
	dst = append(dst, suffix...)
	all := *ls
	if le != "" {
		all.Add("le", le)
	}
	if all.n > 0 {
		dst = append(dst, '{')
		for i := range all.n {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, all.l[i].name...)
			dst = append(dst, '=', '"')
			dst = appendLabelValue(dst, all.l[i].value)
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	dst = append(dst, ' ')
	dst = pyfloat.AppendGo(dst, v)
	return append(dst, '\n')
}

func appendLabelValue(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '"':
			dst = append(dst, `\"`...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// leStrings formats bucket bounds as "le" values once, plus "+Inf" at the end.
func LeStrings(bounds []float64) []string {
	s := make([]string, len(bounds)+1)
	for i, b := range bounds {
		s[i] = pyfloat.FormatGo(b)
	}
	s[len(bounds)] = "+Inf"
	return s
}

// appendHistogramChild writes one child's buckets (cumulative), _count and _sum.
func AppendHistogramChild(dst []byte, name string, ls *LabelSet, les []string, counts []uint64, sum float64) []byte {
	var cum uint64
	for i, le := range les {
		cum += counts[i]
		dst = AppendSample(dst, name, "_bucket", ls, le, float64(cum))
	}
	dst = AppendSample(dst, name, "_count", ls, "", float64(cum))
	return AppendSample(dst, name, "_sum", ls, "", sum)
}

// AppendSampleLabels writes one sample line with labels given as name and value pairs, which it
// sorts by name: for the few samples with more labels than a LabelSet holds (a TensorRT-LLM
// config info gauge has nine). LabelSet stays small because the pages copy it for every sample.
func AppendSampleLabels(dst []byte, name string, labels [][2]string, v float64) []byte {
	sorted := slices.Clone(labels)
	slices.SortFunc(sorted, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	dst = append(dst, name...)
	dst = append(dst, '{')
	for i, l := range sorted {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, l[0]...)
		dst = append(dst, '=', '"')
		dst = appendLabelValue(dst, l[1])
		dst = append(dst, '"')
	}
	dst = append(dst, '}', ' ')
	dst = pyfloat.AppendGo(dst, v)
	return append(dst, '\n')
}
