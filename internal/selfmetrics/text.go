package selfmetrics

import (
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/promname"
)

// textPage builds the part of /metrics that changes with the fleet: each target's scrapes, every
// worker's last interval, the last step and the sinks, in the text exposition format (0.0.4).
// client_golang made a constant metric, its label pairs and a protocol buffer of every sample,
// then hashed and sorted them all: at 1,000 targets, 26,000 samples took 170 ms of CPU and 30
// MB of garbage per GET (BenchmarkHandler), 0.6 s in a run, where a Prometheus scraping vllmstat
// every 5 s would have cost it two thirds as much again as its scrapes of the fleet. Here each
// sample is one line appended to one buffer, and the lines are written family by family.
//
// The format is Prometheus' text format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): a family's samples follow its
// HELP and TYPE lines, label values are quoted with \\, \" and \n escaped, and values are
// written as Go's shortest float ('g', -1), with NaN, +Inf and -Inf spelled so and -0 as 0.
// Tests read the pages with prometheus/common's parser, promtool and a real Prometheus.
type textPage struct {
	buf  []byte
	fams map[string]*textFamily
	help func(name string) string // a family's HELP text, asked once per family
}

// textFamily is one family's lines: spans of the page's buffer.
type textFamily struct {
	typ, help string
	lines     []span
}

type span struct{ start, end int }

func newTextPage(size int, help func(name string) string) *textPage {
	return &textPage{buf: make([]byte, 0, size), fams: map[string]*textFamily{}, help: help}
}

// add appends one sample. The caller names each sample once: the series it writes are keyed by
// target, worker or sink, each written once.
func (p *textPage) add(name, typ string, labels []promname.Label, v float64) {
	f := p.fams[name]
	if f == nil {
		f = &textFamily{typ: typ, help: p.help(name)}
		p.fams[name] = f
	}
	start := len(p.buf)
	p.buf = append(p.buf, name...)
	if len(labels) > 0 {
		p.buf = append(p.buf, '{')
		for i, l := range labels {
			if i > 0 {
				p.buf = append(p.buf, ',')
			}
			p.buf = append(p.buf, l.Name...)
			p.buf = append(p.buf, '=', '"')
			p.buf = appendEscaped(p.buf, l.Value, true)
			p.buf = append(p.buf, '"')
		}
		p.buf = append(p.buf, '}')
	}
	p.buf = append(p.buf, ' ')
	p.buf = appendValue(p.buf, v)
	p.buf = append(p.buf, '\n')
	f.lines = append(f.lines, span{start, len(p.buf)})
}

// writeTo writes the families sorted by name.
func (p *textPage) writeTo(w io.Writer) error {
	var head []byte
	for _, name := range slices.Sorted(maps.Keys(p.fams)) {
		f := p.fams[name]
		head = append(head[:0], "# HELP "...)
		head = append(head, name...)
		head = append(head, ' ')
		head = appendEscaped(head, f.help, false)
		head = append(head, "\n# TYPE "...)
		head = append(head, name...)
		head = append(head, ' ')
		head = append(head, f.typ...)
		head = append(head, '\n')
		if _, err := w.Write(head); err != nil {
			return err
		}
		for _, l := range f.lines {
			if _, err := w.Write(p.buf[l.start:l.end]); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendEscaped appends s with backslashes and line feeds escaped, and double quotes too in a
// label value (a HELP line leaves them as they are).
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendValue writes v as client_golang's text encoder does: a zero of either sign as 0.
func appendValue(b []byte, v float64) []byte {
	switch {
	case v == 0:
		return append(b, '0')
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
