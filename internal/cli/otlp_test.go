package cli

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

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
