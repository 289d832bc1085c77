// Package collectortest sends the otlp sink's metrics and spans to the OpenTelemetry
// Collector's own OTLP receiver (go.opentelemetry.io/collector/receiver/otlpreceiver), over
// HTTP and gRPC, and reads back what the Collector's pipeline got. It is a module of its own,
// so that the Collector's code stays out of vllmstat's.
package collectortest

import (
	"fmt"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/sink/otlp"
	"github.com/vllmstat/vllmstat/internal/sink/otlp/otlptest"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// collector is a Collector's OTLP receiver on loopback feeding two sinks of its test consumers.
type collector struct {
	httpURL, grpcURL string
	metrics          *consumertest.MetricsSink
	traces           *consumertest.TracesSink
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startCollector(t *testing.T) *collector {
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	grpcAddr, httpAddr := freePort(t), freePort(t)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr
	c := &collector{httpURL: "http://" + httpAddr, grpcURL: "http://" + grpcAddr, metrics: new(consumertest.MetricsSink), traces: new(consumertest.TracesSink)}
	set := receivertest.NewNopSettings(f.Type())
	mr, err := f.CreateMetrics(t.Context(), set, cfg, c.metrics)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := f.CreateTraces(t.Context(), set, cfg, c.traces)
	if err != nil {
		t.Fatal(err)
	}
	// One receiver serves both signals (the factory shares it by config): started once.
	if err := mr.Start(t.Context(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Shutdown(t.Context()); tr.Shutdown(t.Context()) })
	return c
}

// points are the gauge points of the metrics the Collector got for one step (one export each),
// keyed as otlptest.Want keys them.
func points(t *testing.T, md pmetric.Metrics, end time.Time) map[string]float64 {
	out := map[string]float64{}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			if sms.At(j).Scope().Name() != otlp.Scope {
				t.Errorf("scope %q", sms.At(j).Scope().Name())
			}
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				if m.Type() != pmetric.MetricTypeGauge {
					t.Fatalf("%s is a %s, want a gauge", m.Name(), m.Type())
				}
				dps := m.Gauge().DataPoints()
				for p := range dps.Len() {
					dp := dps.At(p)
					if !dp.Timestamp().AsTime().Equal(end) {
						t.Fatalf("%s at %s, want the step's end %s", m.Name(), dp.Timestamp().AsTime(), end)
					}
					out[m.Name()+"{"+attrs(dp.Attributes())+"}"] = dp.DoubleValue()
				}
			}
		}
	}
	return out
}

func attrs(m pcommon.Map) string {
	var s []string
	for k, v := range m.All() {
		s = append(s, k+"="+v.AsString())
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func records(t *testing.T) []*step.Record {
	rs, err := report.ReadSteps(filepath.Join("..", "..", "..", "keyset", "testdata", "vllm.jsonl"))
	if err != nil || len(rs) == 0 {
		t.Fatalf("%d records: %v", len(rs), err)
	}
	return rs
}

func newSink(t *testing.T, yml string) *otlp.Sink {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(yml), &n); err != nil {
		t.Fatal(err)
	}
	set, err := otlp.ParseSettings(config.SinkSpec{Type: "otlp", Path: "sinks[0]", Settings: n.Content[0]}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s, err := otlp.New(set, vllm.Prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The steps of a demo run (every option that adds keys), sent to the Collector's receiver:
// each step one export whose every key has steps.jsonl's value at the step's end, and its
// spans, the step's a child of the trainer's span, each phase run a child of the step's.
func TestTheCollectorGetsEveryStep(t *testing.T) {
	for _, protocol := range []string{otlp.ProtocolHTTP, otlp.ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			c := startCollector(t)
			endpoint := c.httpURL
			if protocol == otlp.ProtocolGRPC {
				endpoint = c.grpcURL
			}
			s := newSink(t, fmt.Sprintf("{endpoint: %q, protocol: %s, spans: true, compression: gzip}", endpoint, protocol))
			recs := records(t)
			const trace, trainerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			wantPhases := 0
			for _, r := range recs {
				r.TraceParent = "00-" + trace + "-" + trainerSpan + "-01"
				for _, ph := range r.Phases { // runs are not part of the JSON line: one each
					ph.Runs = []step.Run{{Start: r.Start, End: r.Start.Add(time.Duration(ph.DurationS * float64(time.Second)))}}
					wantPhases++
				}
				if err := s.Write(t.Context(), r); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := c.metrics.AllMetrics()
			if len(got) != len(recs) {
				t.Fatalf("the collector got %d exports for %d steps", len(got), len(recs))
			}
			for i, r := range recs {
				pts := points(t, got[i], r.End)
				want := otlptest.Want(r)
				for k, v := range want {
					if g, ok := pts[k]; !ok || !(g == v || math.IsNaN(g) && math.IsNaN(v)) {
						t.Errorf("step %d: %s = %v (got: %v), steps.jsonl has %v", r.Step, k, g, ok, v)
					}
				}
				// and the step's scrapes, ok and failed, and each phase's duration and intervals
				if n := len(want) + 2 + 2*len(r.Phases); len(pts) != n {
					t.Errorf("step %d: %d points, want %d", r.Step, len(pts), n)
				}
			}
			steps, phases := 0, 0
			for _, td := range c.traces.AllTraces() {
				rss := td.ResourceSpans()
				for i := range rss.Len() {
					sss := rss.At(i).ScopeSpans()
					for j := range sss.Len() {
						spans := sss.At(j).Spans()
						var stepID string
						for k := range spans.Len() {
							sp := spans.At(k)
							if sp.TraceID().String() != trace {
								t.Errorf("span %s in trace %s, want the trainer's %s", sp.Name(), sp.TraceID(), trace)
							}
							switch sp.Name() {
							case otlp.StepSpan:
								steps++
								stepID = sp.SpanID().String()
								n, _ := sp.Attributes().Get("vllmstat.step")
								if sp.ParentSpanID().String() != trainerSpan || n.AsString() != strconv.FormatInt(recs[steps-1].Step, 10) {
									t.Errorf("step span %s under %s, want step %d under the trainer's %s", n.AsString(), sp.ParentSpanID(), recs[steps-1].Step, trainerSpan)
								}
							case otlp.PhaseSpan:
								phases++
								if sp.ParentSpanID().String() != stepID {
									t.Errorf("phase span under %s, want its step's %s", sp.ParentSpanID(), stepID)
								}
							}
						}
					}
				}
			}
			if steps != len(recs) {
				t.Errorf("%d step spans for %d steps", steps, len(recs))
			}
			if phases != wantPhases || phases == 0 {
				t.Errorf("%d phase spans, want %d", phases, wantPhases)
			}
		})
	}
}
