package cli

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sink/otlp"
	"github.com/vllmstat/vllmstat/internal/sink/otlp/otlptest"
)

// A demo run with an otlp sink: the receiver gets every step, at its end, with every value of
// steps.jsonl (the step's, each phase's and each worker's), over both protocols.
func TestDemoOTLP(t *testing.T) {
	for _, protocol := range []string{otlp.ProtocolHTTP, otlp.ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			rc := otlptest.StartHTTP(t)
			if protocol == otlp.ProtocolGRPC {
				rc = otlptest.StartGRPC(t)
			}
			dir := t.TempDir()
			cfg := filepath.Join(t.TempDir(), "vllmstat.yaml")
			yml := fmt.Sprintf("sinks:\n  - {type: otlp, endpoint: %q, protocol: %s, keys: all}\n", rc.URL, protocol)
			if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			args := []string{"--steps", "2", "--servers", "1", "--dp", "2", "--speed", "8", "--interval", "0.2", "--colocated",
				"--plots=false", "--terminal-timelines=false", "--config", cfg, "--out", dir}
			if code := demoWith(context.Background(), args, &out, &errb); code != 0 {
				t.Fatalf("demo exited %d\n%s", code, errb.String())
			}
			steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
			reqs, _ := rc.Got()
			if len(steps) != 2 || len(reqs) != len(steps) {
				t.Fatalf("%d steps written, %d exported", len(steps), len(reqs))
			}
			for i := range steps {
				r := &steps[i]
				got := map[string]float64{}
				for _, p := range otlptest.Points(t, otlp.Scope, reqs[i:i+1]) {
					if !p.T.Equal(r.End) {
						t.Fatalf("step %d: %s at %s, want the step's end %s", r.Step, p.Name, p.T, r.End)
					}
					got[p.Key()] = p.V
				}
				want := otlptest.Want(r)
				if len(want) < 100 {
					t.Fatalf("step %d: only %d keys to compare", r.Step, len(want))
				}
				for k, v := range want {
					if g, ok := got[k]; !ok || !(g == v || math.IsNaN(g) && math.IsNaN(v)) {
						t.Errorf("step %d: %s = %v (sent: %v), steps.jsonl has %v", r.Step, k, g, ok, v)
					}
				}
			}
		})
	}
}

// A trainer that ends its steps with its span's W3C traceparent gets vllmstat's step spans as
// children of its own, each phase run a child of the step's; a step ended without one is the
// root of the run's own trace.
func TestRunSpansUnderTheTrainersSpan(t *testing.T) {
	t.Parallel()
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 1, 2, 0, 10, 3
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	rc := otlptest.StartHTTP(t)
	cfg := filepath.Join(t.TempDir(), "vllmstat.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "sinks:\n  - {type: otlp, endpoint: %q, spans: true, keys: summary}\n", rc.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfg}
	for _, u := range fleet.URLs() {
		args = append(args, "--target", u)
	}
	l := startLive(t, t.TempDir(), args...)
	const trace, trainerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	endStep := func(n int, traceparent string) {
		req, _ := http.NewRequest(http.MethodPost, l.api+"/v1/steps/end", strings.NewReader(fmt.Sprintf(`{"step": %d}`, n)))
		req.Header.Set("Content-Type", "application/json")
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("end step %d: %d", n, resp.StatusCode)
		}
	}
	l.phase("start", "rollout")
	l.phase("end", "rollout")
	l.phase("start", "train")
	endStep(1, "00-"+trace+"-"+trainerSpan+"-01")
	l.phase("end", "train")
	endStep(2, "")
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	bySpan := map[string]otlptest.Span{}
	var steps []otlptest.Span
	for _, sp := range rc.Spans() {
		bySpan[sp.SpanID] = sp
		if sp.Name == otlp.StepSpan {
			steps = append(steps, sp)
		}
	}
	if len(steps) != 2 {
		t.Fatalf("%d step spans, want 2: %+v", len(steps), rc.Spans())
	}
	if steps[0].TraceID != trace || steps[0].Parent != trainerSpan || steps[0].Attrs["vllmstat.step"] != "1" {
		t.Errorf("step 1's span %+v: want a child of the trainer's span %s in trace %s", steps[0], trainerSpan, trace)
	}
	if steps[1].Parent != "" || steps[1].TraceID == trace {
		t.Errorf("step 2's span %+v: want the root of the run's own trace", steps[1])
	}
	phases := map[string][]string{} // by step span: the phases of its children
	for _, sp := range rc.Spans() {
		if sp.Name == otlp.PhaseSpan {
			up, ok := bySpan[sp.Parent]
			if !ok || up.Name != otlp.StepSpan || sp.Start.Before(up.Start) || sp.End.After(up.End) {
				t.Errorf("phase span %+v not inside a step span (%+v)", sp, up)
			}
			phases[sp.Parent] = append(phases[sp.Parent], sp.Attrs["phase"])
		}
	}
	if got := strings.Join(phases[steps[0].SpanID], ","); got != "rollout,train" {
		t.Errorf("step 1's phase spans %q, want rollout,train", got)
	}
	if got := strings.Join(phases[steps[1].SpanID], ","); got != "train" {
		t.Errorf("step 2's phase spans %q, want train (its run from the step's start)", got)
	}
}
