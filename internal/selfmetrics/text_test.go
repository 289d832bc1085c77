package selfmetrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/step"
)

// families reads a text page with prometheus/common's parser.
func families(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	tp := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	return fams
}

// samples keys a family's samples by their labels (sorted by name: client_golang writes them
// so, the page in the walkers' order) and keeps their values.
func samples(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var k []string
		for _, l := range m.GetLabel() {
			k = append(k, l.GetName()+"="+l.GetValue())
		}
		slices.Sort(k)
		v := m.GetGauge().GetValue()
		if f.GetType() == dto.MetricType_COUNTER {
			v = m.GetCounter().GetValue()
		}
		out[strings.Join(k, ",")] = v
	}
	return out
}

// TestPageAsClientGolangWritesIt checks the families with a series per target, worker or sink
// against client_golang: the same samples, walked by promname as before (a worker's interval by
// WalkInterval), made constant metrics of a registry and written by expfmt, read
// back by the same parser as the page.
func TestPageAsClientGolangWritesIt(t *testing.T) {
	m := New(Options{})
	feed(m, testRun(t))
	// A Ray replica's worker labels are quoted in the label value, and a value may be anything.
	m.Interval(step.Interval{WorkerID: step.WorkerID{Target: "http://10.0.0.9:8000/metrics", Engine: "0", Labels: `ReplicaId="a\b",WorkerId="w
1"`},
		TS: time.Unix(1700000000, 5e8), DT: 0.5,
		Values: []step.IntervalValue{{Key: "num_requests_running", V: math.Inf(1)}, {Key: "kv_cache_usage_perc", V: math.NaN()},
			{Key: "generation_tokens", V: 1e21}, {Key: "prompt_tokens", V: math.Copysign(0, -1)}, {Key: "num_preemptions", V: 1e-7}}})

	reg := prometheus.NewRegistry()
	descs := map[string]*prometheus.Desc{}
	var metrics []prometheus.Metric
	emit := func(name string, vt prometheus.ValueType, ls []promname.Label, v float64) {
		names, values := make([]string, len(ls)), make([]string, len(ls))
		for i, l := range ls {
			names[i], values[i] = l.Name, l.Value
		}
		key := name + "\xff" + strings.Join(names, "\xff")
		if descs[key] == nil {
			descs[key] = prometheus.NewDesc(name, help(m.opt.Prefix, name), names, nil)
		}
		metrics = append(metrics, prometheus.MustNewConstMetric(descs[key], vt, v, values...))
	}
	gauge := func(name string, ls []promname.Label, v float64) { emit(name, prometheus.GaugeValue, ls, v) }
	counter := func(name string, ls []promname.Label, v float64) { emit(name, prometheus.CounterValue, ls, v) }
	for u, s := range m.series {
		tl := []promname.Label{{Name: "target", Value: u}}
		counter("vllmstat_target_scrapes_total", tl, s.scrapes)
		counter("vllmstat_target_skipped_ticks_total", tl, s.skipped)
		if s.scraped {
			gauge("vllmstat_target_up", tl, s.up)
			gauge("vllmstat_target_scrape_duration_seconds", tl, s.duration)
			gauge("vllmstat_target_scrape_body_bytes", tl, s.bodyBytes)
		}
		for _, f := range s.failures {
			counter("vllmstat_target_scrape_failures_total", append(tl, promname.Label{Name: "reason", Value: f.reason}), f.n)
		}
	}
	for _, s := range m.sinks {
		ls := []promname.Label{{Name: "sink", Value: s.name}}
		gauge("vllmstat_sink_queue_length", ls, float64(s.st.Queued.Load()))
		counter("vllmstat_sink_written_total", ls, float64(s.st.Written.Load()))
		counter("vllmstat_sink_errors_total", ls, float64(s.st.Errors.Load()))
		counter("vllmstat_sink_dropped_total", ls, float64(s.st.Dropped.Load()))
	}
	for _, s := range m.samples {
		ls := []promname.Label{{Name: "sink", Value: s.name}}
		gauge("vllmstat_sink_samples_queued", ls, float64(s.st.Queued.Load()))
		counter("vllmstat_sink_samples_written_total", ls, float64(s.st.Written.Load()))
		counter("vllmstat_sink_request_errors_total", ls, float64(s.st.Errors.Load()))
		counter("vllmstat_sink_samples_dropped_total", ls, float64(s.st.Dropped.Load()))
	}
	promname.WalkStep(m.opt.Prefix, m.last, func(name string, ls []promname.Label, v float64) {
		gauge(name, slices.Clone(ls), v)
	})
	gauge("vllmstat_step_end_timestamp_seconds", nil, float64(m.last.End.UnixMilli())/1e3)
	for _, k := range m.intervals {
		iv := k.iv
		iv.Values = k.values
		promname.WalkInterval(m.opt.Prefix, &iv, func(name string, ls []promname.Label, v float64) {
			gauge(name, slices.Clone(ls), v)
		})
		gauge("vllmstat_interval_timestamp_seconds", promname.IntervalLabels(iv.WorkerID), float64(iv.TS.UnixMilli())/1e3)
	}
	reg.MustRegister(constCollector(metrics))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&want, f); err != nil {
			t.Fatal(err)
		}
	}
	wantFams := families(t, want.Bytes())

	var got bytes.Buffer
	if err := m.page().writeTo(&got); err != nil {
		t.Fatal(err)
	}
	gotFams := families(t, got.Bytes())
	if g, w := slices.Sorted(maps.Keys(gotFams)), slices.Sorted(maps.Keys(wantFams)); !slices.Equal(g, w) {
		t.Fatalf("families:\n got %v\nwant %v", g, w)
	}
	nan := 0
	for name, w := range wantFams {
		g := gotFams[name]
		if g.GetType() != w.GetType() || g.GetHelp() != w.GetHelp() {
			t.Errorf("%s: type %v help %q, want %v %q", name, g.GetType(), g.GetHelp(), w.GetType(), w.GetHelp())
		}
		gs, ws := samples(g), samples(w)
		if len(gs) != len(ws) {
			t.Errorf("%s: %d series, want %d", name, len(gs), len(ws))
		}
		for k, wv := range ws {
			gv, ok := gs[k]
			switch {
			case !ok:
				t.Errorf("%s{%s}: missing", name, k)
			case math.IsNaN(wv) && math.IsNaN(gv):
				nan++
			case math.Float64bits(gv) != math.Float64bits(wv):
				t.Errorf("%s{%s} = %v, want %v", name, k, gv, wv)
			}
		}
	}
	if nan == 0 {
		t.Error("no NaN value compared")
	}
	// Families are written in the order of their names, each family's series in the order of
	// their target and worker: the same state gives the same page.
	var again bytes.Buffer
	if err := m.page().writeTo(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), again.Bytes()) {
		t.Error("two pages of the same state differ")
	}
}

type constCollector []prometheus.Metric

func (constCollector) Describe(chan<- *prometheus.Desc) {}
func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}

// TestHandlerGzip checks that a client that takes gzip gets the same page gzipped, and one that
// refuses it (q=0) or does not ask gets it plain.
func TestHandlerGzip(t *testing.T) {
	m := fleetMetrics(t, 3)
	h := m.Handler()
	serve := func(enc string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
			t.Fatalf("Accept-Encoding %q: %d, Content-Type %q", enc, rec.Code, rec.Header().Get("Content-Type"))
		}
		return rec
	}
	plain := serve("").Body.Bytes()
	// Process and Go runtime figures move between two GETs; the rest must not.
	stable := func(b []byte) string {
		var out []string
		for l := range strings.Lines(string(b)) {
			if strings.Contains(l, "vllmstat_") && !strings.Contains(l, "process_") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "")
	}
	for _, enc := range []string{"gzip", "deflate, gzip;q=0.5", "gzip, zstd"} {
		rec := serve(enc)
		if rec.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want gzip", enc, rec.Header().Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if stable(body) != stable(plain) || !strings.Contains(stable(body), "vllmstat_interval_") {
			t.Errorf("Accept-Encoding %q: the gzipped page differs from the plain one", enc)
		}
	}
	for _, enc := range []string{"gzip;q=0", "identity", "deflate"} {
		if rec := serve(enc); rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want none", enc, rec.Header().Get("Content-Encoding"))
		}
	}
}

// FuzzTextSample checks one sample's line against prometheus/common's parser: whatever the label
// value and the value, the parser reads back both exactly (a negative zero as zero).
func FuzzTextSample(f *testing.F) {
	f.Add(`ReplicaId="r1",WorkerId="w1"`, 1.5)
	f.Add("a\\b\nc\"d", math.Inf(-1))
	f.Add("http://10.0.0.1:8000/metrics", 1e21)
	f.Add("\\n", math.Copysign(0, -1))
	f.Add("é\x00\xff", 5e-324)
	f.Add("", math.MaxFloat64)
	f.Fuzz(func(t *testing.T, label string, v float64) {
		if !model.LabelValue(label).IsValid() {
			return // not UTF-8: no Prometheus label value
		}
		p := newTextPage(0, func(string) string { return "A \\ help\nline." })
		p.add("vllmstat_fuzz", "gauge", []promname.Label{{Name: "l", Value: label}}, v)
		var b bytes.Buffer
		if err := p.writeTo(&b); err != nil {
			t.Fatal(err)
		}
		fams := families(t, b.Bytes())
		f := fams["vllmstat_fuzz"]
		if f == nil || len(f.GetMetric()) != 1 || f.GetHelp() != "A \\ help\nline." {
			t.Fatalf("read back %v from %q", f, b.String())
		}
		m := f.GetMetric()[0]
		got := m.GetGauge().GetValue()
		if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label {
			t.Errorf("label %q read back as %v from %q", label, m.GetLabel(), b.String())
		}
		if math.Float64bits(got) != math.Float64bits(v) && !(math.IsNaN(got) && math.IsNaN(v)) && !(v == 0 && got == 0) {
			t.Errorf("value %v read back as %v from %q", v, got, b.String())
		}
	})
}
