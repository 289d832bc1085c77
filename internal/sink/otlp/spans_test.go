package otlp

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sink/otlp/otlptest"
	"github.com/vllmstat/vllmstat/internal/step"
)

// A step is a span from its start to its end with its headline figures, a child of the
// trainer's span when the step's end carried its traceparent, and each run of a phase is a
// child span of the step's; steps without a traceparent share one trace of the run's.
func TestStepsAndPhasesAsSpans(t *testing.T) {
	for _, protocol := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			rc := otlptest.StartHTTP(t)
			if protocol == ProtocolGRPC {
				rc = otlptest.StartGRPC(t)
			}
			s := newSink(t, fmt.Sprintf("{endpoint: %q, protocol: %s, spans: true}", rc.URL, protocol), nil)
			recs := demoRecords(t)
			const trainerTrace, trainerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			recs[0].TraceParent = "00-" + trainerTrace + "-" + trainerSpan + "-01"
			recs[1].TraceParent = "00-not-a-trace-parent-01" // malformed: ignored
			recs[0].Publishes = []step.Publish{{Version: 7, At: recs[0].End}}
			recs[0].Scrapes.Failed = 2
			restartAt := recs[0].Start.Add(recs[0].End.Sub(recs[0].Start) / 2)
			recs[0].Restarts = []step.Restart{{Worker: step.WorkerID{Target: "10.0.0.7:8000", Engine: "1", Labels: `ReplicaId="r1"`}, At: restartAt}}
			recs[0].RestartsUnlisted = 5
			t0, d := recs[2].Start, recs[2].End.Sub(recs[2].Start)/4 // two runs of a phase in step 3
			recs[2].Phases["rollout"].Runs = []step.Run{{Start: t0.Add(d), End: t0.Add(2 * d)}, {Start: t0.Add(3 * d), End: recs[2].End}}
			for _, r := range recs {
				if err := s.Write(t.Context(), r); err != nil {
					t.Fatal(err)
				}
			}
			s.Close(t.Context())
			var steps []otlptest.Span
			children := map[string][]otlptest.Span{}
			for _, sp := range rc.Spans() {
				switch sp.Name {
				case StepSpan:
					steps = append(steps, sp)
				case PhaseSpan:
					children[sp.Parent] = append(children[sp.Parent], sp)
				default:
					t.Errorf("span %q", sp.Name)
				}
			}
			if len(steps) != len(recs) {
				t.Fatalf("%d step spans for %d steps", len(steps), len(recs))
			}
			for i, sp := range steps {
				r := recs[i]
				if sp.Attrs["vllmstat.step"] != strconv.FormatInt(r.Step, 10) || !sp.Start.Equal(r.Start) || !sp.End.Equal(r.End) {
					t.Errorf("step span %d: %v from %s to %s, want step %d from %s to %s", i, sp.Attrs["vllmstat.step"], sp.Start, sp.End, r.Step, r.Start, r.End)
				}
				if got, want := sp.Attrs["vllm.prefix_cache_hit_rate"], strconv.FormatFloat(r.Metrics["vllm/prefix_cache_hit_rate"], 'g', -1, 64); got != want {
					t.Errorf("step %d: hit rate attribute %q, want %q", r.Step, got, want)
				}
				runs := 0
				for _, ph := range r.Phases {
					runs += len(ph.Runs)
				}
				if got := children[sp.SpanID]; len(got) != runs {
					t.Errorf("step %d: %d phase spans, want %d", r.Step, len(got), runs)
				}
				for _, c := range children[sp.SpanID] {
					if c.TraceID != sp.TraceID || c.Start.Before(r.Start) || c.End.After(r.End) || c.Attrs["phase"] == "" {
						t.Errorf("step %d: phase span %+v outside its step span %+v", r.Step, c, sp)
					}
				}
			}
			if steps[0].TraceID != trainerTrace || steps[0].Parent != trainerSpan {
				t.Errorf("step 1 in trace %s under %s, want the trainer's %s under %s", steps[0].TraceID, steps[0].Parent, trainerTrace, trainerSpan)
			}
			var names []string
			for _, e := range steps[0].Events {
				names = append(names, e.Name)
			}
			if got := strings.Join(names, ","); got != "scrapes failed,policy published,engine restarted,engine restarts not listed" {
				t.Errorf("step 1's events %q, want its failed scrapes, its publish, its restart and the count of those not listed", got)
			} else if e := steps[0].Events[3]; !e.Time.Equal(recs[0].End) || e.Attrs["count"] != "5" {
				t.Errorf("restarts not listed: at %s with %v, want a count of 5 at the step's end", e.Time, e.Attrs)
			} else if e := steps[0].Events[2]; !e.Time.Equal(restartAt) || e.Attrs["target"] != "10.0.0.7:8000" || e.Attrs["engine"] != "1" || e.Attrs["worker_labels"] != `ReplicaId="r1"` {
				t.Errorf("restart event at %s with %v, want at %s naming the worker", e.Time, e.Attrs, restartAt)
			}
			if e := steps[0].Events[1]; !e.Time.Equal(recs[0].End) || e.Attrs["version"] != "7" {
				t.Errorf("publish event at %s with %v, want version 7 at %s", e.Time, e.Attrs, recs[0].End)
			}
			if steps[1].Parent != "" || steps[1].TraceID != steps[2].TraceID || steps[1].TraceID == trainerTrace {
				t.Errorf("steps 2 and 3 without a valid traceparent: traces %s and %s, parent %q; want one trace of the run's, no parent", steps[1].TraceID, steps[2].TraceID, steps[1].Parent)
			}
			if got := children[steps[2].SpanID]; len(got) < 2 {
				t.Fatalf("step 3's phase spans %v", got)
			}
		})
	}
}

// A step whose metrics were accepted and whose spans were not sends only its spans again.
func TestSpansRetriedAlone(t *testing.T) {
	rc := otlptest.StartHTTP(t)
	rc.FailSpans = 1
	s := newSink(t, fmt.Sprintf("{endpoint: %q, spans: true}", rc.URL), nil)
	defer s.Close(t.Context())
	r := demoRecords(t)[0]
	if err := s.Write(t.Context(), r); err == nil {
		t.Fatal("refused spans gave no error")
	}
	if err := s.Write(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := rc.Got(); len(reqs) != 1 || len(rc.Spans()) == 0 {
		t.Fatalf("%d metric requests and %d spans: want the metrics once and the spans", len(reqs), len(rc.Spans()))
	}
}
