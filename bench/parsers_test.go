package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	vmprom "github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// sample is one sample line as a parser read it: its exact name, its labels sorted by name
// (le and quantile values written in one canonical float form, since each parser keeps them
// differently), and its value.
type sample struct {
	name   string
	labels []pair
	value  float64
}

type pair struct{ name, value string }

// key identifies the series of a sample across parsers.
func (s sample) key() string {
	var b strings.Builder
	b.WriteString(s.name)
	for _, p := range s.labels {
		fmt.Fprintf(&b, ",%s=%q", p.name, p.value)
	}
	return b.String()
}

// label returns the value of label name, and whether the sample has it.
func (s sample) label(name string) (string, bool) {
	for _, p := range s.labels {
		if p.name == name {
			return p.value, true
		}
	}
	return "", false
}

// newSample sorts the labels and writes le and quantile values canonically.
func newSample(name string, ls []pair, v float64) (sample, error) {
	for i, p := range ls {
		if p.name != "le" && p.name != "quantile" {
			continue
		}
		f, err := strconv.ParseFloat(p.value, 64)
		if err != nil {
			return sample{}, fmt.Errorf("%s: %s=%q: %w", name, p.name, p.value, err)
		}
		ls[i].value = strconv.FormatFloat(f, 'g', -1, 64)
	}
	slices.SortFunc(ls, func(a, b pair) int { return strings.Compare(a.name, b.name) })
	return sample{name: name, labels: ls, value: v}, nil
}

// str views b as a string without copying, as VictoriaMetrics' scraper does with a body it
// keeps unchanged while the rows are in use.
func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// vmParse reads page into rows with VictoriaMetrics' parser, as its scraper does; a line it
// cannot read is an error here (the scraper logs it and goes on).
func vmParse(rows *vmprom.Rows, page []byte) error {
	var errs []string
	rows.UnmarshalWithErrLogger(str(page), func(s string) { errs = append(errs, s) })
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func vmSamples(page []byte) ([]sample, error) {
	var rows vmprom.Rows
	if err := vmParse(&rows, page); err != nil {
		return nil, err
	}
	out := make([]sample, 0, len(rows.Rows))
	for _, r := range rows.Rows {
		ls := make([]pair, 0, len(r.Tags))
		for _, t := range r.Tags {
			ls = append(ls, pair{t.Key, t.Value})
		}
		s, err := newSample(r.Metric, ls, r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// promParse walks page with Prometheus' text parser entry by entry, as its scrape loop does,
// and calls each for every float sample with its labels (valid until the next call).
func promParse(st *labels.SymbolTable, page []byte, each func(lset *labels.Labels, v float64)) error {
	p := textparse.NewPromParser(page, st, false)
	var lset labels.Labels
	for {
		et, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if et != textparse.EntrySeries {
			continue // HELP, TYPE and comments carry no samples
		}
		_, _, v := p.Series()
		p.Labels(&lset)
		each(&lset, v)
	}
}

func promSamples(page []byte) ([]sample, error) {
	var out []sample
	var bad error
	err := promParse(labels.NewSymbolTable(), page, func(lset *labels.Labels, v float64) {
		var name string
		var ls []pair
		lset.Range(func(l labels.Label) {
			if l.Name == model.MetricNameLabel {
				name = l.Value
				return
			}
			ls = append(ls, pair{l.Name, l.Value})
		})
		s, err := newSample(name, ls, v)
		if err != nil && bad == nil {
			bad = err
		}
		out = append(out, s)
	})
	return out, errors.Join(err, bad)
}

// expfmtParse decodes page into metric families with expfmt's text parser.
func expfmtParse(tp *expfmt.TextParser, page []byte) (map[string]*dto.MetricFamily, error) {
	return tp.TextToMetricFamilies(bytes.NewReader(page))
}

func newTextParser() *expfmt.TextParser {
	tp := expfmt.NewTextParser(model.UTF8Validation)
	return &tp
}

// expfmtSamples flattens expfmt's families back into the sample lines of the text format.
func expfmtSamples(page []byte) ([]sample, error) {
	mfs, err := expfmtParse(newTextParser(), page)
	if err != nil {
		return nil, err
	}
	var out []sample
	var bad error
	add := func(name string, m *dto.Metric, v float64, extra ...pair) {
		ls := extra
		for _, l := range m.GetLabel() {
			ls = append(ls, pair{l.GetName(), l.GetValue()})
		}
		s, err := newSample(name, ls, v)
		if err != nil && bad == nil {
			bad = err
		}
		out = append(out, s)
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					c := b.GetCumulativeCountFloat()
					if c == 0 {
						c = float64(b.GetCumulativeCount())
					}
					add(name+"_bucket", m, c, pair{"le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)})
				}
				add(name+"_sum", m, h.GetSampleSum())
				c := h.GetSampleCountFloat()
				if c == 0 {
					c = float64(h.GetSampleCount())
				}
				add(name+"_count", m, c)
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, m, q.GetValue(), pair{"quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)})
				}
				add(name+"_sum", m, s.GetSampleSum())
				add(name+"_count", m, float64(s.GetSampleCount()))
			default:
				return nil, fmt.Errorf("%s: unexpected type %v", name, mf.GetType())
			}
		}
	}
	return out, bad
}
