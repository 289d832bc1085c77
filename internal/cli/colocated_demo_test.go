package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// TestColocatedDemo runs the colocated demo as the issue asks for it: four steps, an eval batch
// every second one, at four times real speed. Every step has a rollout phase and every second
// one an eval phase, written under "phases" in steps.jsonl and as flat vllm/rollout/... and
// vllm/eval/... keys; the rollout generates faster than the whole step (which sleeps for the
// training time) and idles no more; a phase counts no more than its step, nor do all phases
// together; and the table prints the rollout's figures.
func TestColocatedDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := demoWith(context.Background(), []string{"--colocated", "--eval-every", "2", "--steps", "4", "--speed", "4", "--out", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	steps, raw := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) != 4 {
		t.Fatalf("%d steps written, want 4\n%s", len(steps), out.String())
	}
	counters := []string{"vllm/generation_tokens", "vllm/prompt_tokens", "vllm/prefix_cache_queries", "vllm/prefix_cache_hits",
		"vllm/num_preemptions", "vllm/request_success/stop", "vllm/request_success/length"}
	for i, s := range steps {
		want := []string{phaseRollout}
		if s.Step%2 == 0 {
			want = append(want, phaseEval)
		}
		var names []string
		for name := range s.Phases {
			names = append(names, name)
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("step %d: phases %v, want %v", s.Step, names, want)
			continue
		}
		roll := s.Phases[phaseRollout]
		if roll.Intervals != 1 || !(roll.DurationS > 0) || roll.DurationS >= s.DurationS {
			t.Errorf("step %d (%.1fs): rollout ran %d times for %.1fs", s.Step, s.DurationS, roll.Intervals, roll.DurationS)
		}

		// The flat keys a tracker logs, and the JSON line's layout.
		flat := s.Scalars("vllm")
		for _, name := range want {
			if _, ok := flat["vllm/"+name+"/generation_tokens"]; !ok {
				t.Errorf("step %d: no vllm/%s/generation_tokens among the flat keys", s.Step, name)
			}
		}
		var line struct {
			Phases map[string]struct {
				Metrics map[string]float64 `json:"metrics"`
			} `json:"phases"`
		}
		if err := json.Unmarshal(bytes.Split(bytes.TrimSpace(raw), []byte("\n"))[i], &line); err != nil {
			t.Fatal(err)
		}
		if _, ok := line.Phases[phaseRollout].Metrics["vllm/generation_tokens_per_s"]; !ok {
			t.Errorf("step %d: steps.jsonl has no phases.rollout.metrics[\"vllm/generation_tokens_per_s\"]", s.Step)
		}

		m, rm := s.Metrics, roll.Metrics
		if !(rm["vllm/generation_tokens_per_s"] > m["vllm/generation_tokens_per_s"]) {
			t.Errorf("step %d: rollout generates %v tok/s, the whole step %v", s.Step, rm["vllm/generation_tokens_per_s"], m["vllm/generation_tokens_per_s"])
		}
		const idle = "vllm/worker_idle_fraction/mean"
		ri, ok1 := rm[idle]
		si, ok2 := m[idle]
		if !ok1 || !ok2 || ri > si {
			t.Errorf("step %d: rollout idle fraction %v (%v), whole step %v (%v)", s.Step, ri, ok1, si, ok2)
		}
		// Conservation: a scrape's increases go to the step and to at most one phase.
		for _, k := range counters {
			sum := 0.0
			for _, name := range want {
				v := s.Phases[name].Metrics[k]
				if v > m[k] {
					t.Errorf("step %d: phase %s has %s = %v, the step %v", s.Step, name, k, v, m[k])
				}
				sum += v
			}
			if sum > m[k] {
				t.Errorf("step %d: the phases' %s add up to %v, the step's is %v", s.Step, k, sum, m[k])
			}
		}
		if rm["vllm/generation_tokens"] <= 0 || (s.Step%2 == 0 && s.Phases[phaseEval].Metrics["vllm/generation_tokens"] <= 0) {
			t.Errorf("step %d: a phase generated nothing", s.Step)
		}
	}

	// The table shows the rollout's duration and figures.
	rows := tableRows(t, out.String())
	if len(rows) != 4 {
		t.Fatalf("%d table rows, want 4:\n%s", len(rows), out.String())
	}
	for _, s := range steps {
		row := rows[s.Step]
		roll := s.Phases[phaseRollout]
		if got, want := row["roll s"], strconv.FormatFloat(roll.DurationS, 'f', 1, 64); got != want {
			t.Errorf("step %d: roll s %q, want %q", s.Step, got, want)
		}
		if got, want := row["gen tok/s"], strconv.FormatFloat(roll.Metrics["vllm/generation_tokens_per_s"], 'f', 0, 64); got != want {
			t.Errorf("step %d: gen tok/s %q, want the rollout's %q", s.Step, got, want)
		}
		if got, want := row["hit rate"], strconv.FormatFloat(s.Metrics["vllm/prefix_cache_hit_rate"]*100, 'f', 1, 64)+"%"; got != want {
			t.Errorf("step %d: hit rate %q, want the step's %q", s.Step, got, want)
		}
	}
	if !strings.Contains(out.String(), "Columns kv mean, run mean, wait mean, gen tok/s show each step's rollout phase; roll s is its duration.") {
		t.Errorf("no legend:\n%s", out.String())
	}
	// Under each row, where the step's engine-seconds went: the engines generated and slept.
	var ledger []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "     time ") {
			ledger = append(ledger, strings.TrimSpace(l))
		}
	}
	if len(ledger) != len(steps) {
		t.Fatalf("%d ledger lines for %d steps:\n%s", len(ledger), len(steps), out.String())
	}
	for i, s := range steps {
		if want := ledgerLine(s.Metrics, "vllm", vllm.VLLM); ledger[i] != want || !strings.Contains(want, " gen ") || !strings.Contains(want, " asleep ") {
			t.Errorf("step %d: ledger line %q, want %q with the engines generating and asleep", s.Step, ledger[i], want)
		}
	}
}

// tableRows finds the demo table's rows in its output, by step, each column's text under its
// head (the last head "straggler" aside). A row's ledger line is part of the table.
func tableRows(t *testing.T, out string) map[int64]map[string]string {
	t.Helper()
	rows := map[int64]map[string]string{}
	var header string
	inTable := false // the line before was the header, a row or a ledger line
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "step ") && strings.HasSuffix(l, " straggler") {
			header, inTable = l, true
			continue
		}
		if inTable && strings.HasPrefix(l, "     time ") {
			continue
		}
		n, err := strconv.ParseInt(firstOr(strings.Fields(l)), 10, 64)
		if !inTable || err != nil || len(l) < len(header)-len(" straggler") {
			inTable = false
			continue
		}
		row := map[string]string{}
		heads := []string{"step", "secs", "roll s", "workers", "hit rate", "preempt", "kv mean", "kv max", "run mean", "run max",
			"wait mean", "wait max", "gen tok/s", "ttft p50", "ttft p95", "tail s"}
		from := 0
		for _, h := range heads {
			end := strings.Index(header, h) + len(h)
			if end < len(h) {
				continue
			}
			row[h] = strings.TrimSpace(l[from:end])
			from = end
		}
		rows[n] = row
	}
	return rows
}

func firstOr(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// TestColocatedTable prints rows with and without a rollout phase: the rollout's figures in the
// columns the rest of the step waters down, its duration under roll s, the step's elsewhere
// (the straggler tail too, as the straggler beside it); "-" and the step's figures for a step
// without it; and the table without a phase as before.
func TestColocatedTable(t *testing.T) {
	rec := step.Record{Step: 7, DurationS: 20, Workers: 4, Metrics: map[string]float64{
		"vllm/generation_tokens_per_s":     1000,
		"vllm/kv_cache_usage_perc/mean":    0.25,
		"vllm/prefix_cache_hit_rate":       0.5,
		"vllm/num_requests_running/mean":   8,
		"vllm/straggler_tail_s":            4,
		"vllm/kv_cache_usage_perc/max":     0.9,
		"vllm/num_requests_waiting/mean":   1,
		"vllm/time_to_first_token_seconds": 0,
	}, Phases: map[string]*step.Phase{phaseRollout: {DurationS: 8.25, Intervals: 1, Metrics: map[string]float64{
		"vllm/generation_tokens_per_s":   2500,
		"vllm/kv_cache_usage_perc/mean":  0.75,
		"vllm/prefix_cache_hit_rate":     0.9,
		"vllm/num_requests_running/mean": 30,
		"vllm/straggler_tail_s":          1.5,
		"vllm/kv_cache_usage_perc/max":   0.95,
	}}}}
	plain := rec
	plain.Step, plain.Phases = 8, nil

	var b bytes.Buffer
	tab := newStepTable(&b, "vllm")
	tab.phase = phaseRollout
	tab.row(&rec)
	tab.row(&plain)
	rows := tableRows(t, b.String())
	want := map[int64]map[string]string{
		7: {"secs": "20.0", "roll s": "8.2", "gen tok/s": "2500", "kv mean": "0.75", "run mean": "30.0", "tail s": "4.0",
			"hit rate": "50.0%", "kv max": "0.90", "wait mean": "-"},
		8: {"secs": "20.0", "roll s": "-", "gen tok/s": "1000", "kv mean": "0.25", "run mean": "8.0", "tail s": "4.0",
			"hit rate": "50.0%", "kv max": "0.90", "wait mean": "1.0"},
	}
	for n, cols := range want {
		for h, v := range cols {
			if got := rows[n][h]; got != v {
				t.Errorf("step %d: %s %q, want %q\n%s", n, h, got, v, b.String())
			}
		}
	}

	// Without a phase the table is the one it always was, phases or not.
	var with, without bytes.Buffer
	newStepTable(&with, "vllm").row(&rec)
	newStepTable(&without, "vllm").row(&plain)
	if with.String() != strings.Replace(without.String(), "   8 ", "   7 ", 1) {
		t.Errorf("a table without a phase prints a step with phases differently:\n%s\n%s", with.String(), without.String())
	}
	if strings.Contains(with.String(), "roll s") {
		t.Errorf("a table without a phase has a roll s column:\n%s", with.String())
	}
}

// phaseRecorder records the phase calls it gets.
type phaseRecorder struct {
	calls []string
	err   error
}

func (p *phaseRecorder) StartPhase(_ context.Context, name string) (collector.PhaseEdge, error) {
	p.calls = append(p.calls, "start "+name)
	return collector.PhaseEdge{Phase: name, Edge: "start"}, p.err
}

func (p *phaseRecorder) EndPhase(_ context.Context, name string) (collector.PhaseEdge, error) {
	p.calls = append(p.calls, "end "+name)
	return collector.PhaseEdge{Phase: name, Edge: "end"}, p.err
}

// TestColocatedMarkPhase: a batch's start starts its phase and its end ends it; the sleep and
// the wake-up mark none; a failed call says which edge it was.
func TestColocatedMarkPhase(t *testing.T) {
	var p phaseRecorder
	for _, k := range []sim.LoopEdgeKind{sim.RolloutStart, sim.RolloutEnd, sim.EvalStart, sim.EvalEnd, sim.Sleep, sim.Wake} {
		if err := markPhase(context.Background(), &p, k); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"start rollout", "end rollout", "start eval", "end eval"}; !slices.Equal(p.calls, want) {
		t.Errorf("calls %q, want %q", p.calls, want)
	}
	p.err = collector.ErrPhaseNotOpen
	err := markPhase(context.Background(), &p, sim.EvalEnd)
	if !errors.Is(err, collector.ErrPhaseNotOpen) || !strings.Contains(err.Error(), "mark eval_end: ") {
		t.Errorf("error %v", err)
	}
	for _, name := range []string{phaseRollout, phaseEval} {
		if err := step.ValidPhase(name); err != nil {
			t.Errorf("phase name %q: %v", name, err)
		}
	}
}

// TestColocatedDemoFlags: the loop's flags are checked before anything starts.
func TestColocatedDemoFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--eval-every", "2"}, "--train-time and --eval-every need --colocated"},
		{[]string{"--train-time", "5s"}, "--train-time and --eval-every need --colocated"},
		{[]string{"--colocated", "--eval-every", "-1"}, "--train-time and --eval-every must not be negative, got 0s and -1"},
		{[]string{"--colocated", "--train-time", "-2s"}, "--train-time and --eval-every must not be negative, got -2s and 0"},
		{[]string{"--colocated", "--train-time", "soon"}, `invalid value "soon" for flag -train-time`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--out", t.TempDir()}, tt.args...)
			if code := demoWith(context.Background(), args, &out, &errb); code != exitUsage {
				t.Fatalf("exit %d, want %d\n%s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed %q before refusing", out.String())
			}
		})
	}
	var out, errb bytes.Buffer
	if code := demoWith(context.Background(), []string{"-h"}, &out, &errb); code != exitOK {
		t.Fatalf("help exit %d", code)
	}
	for _, want := range []string{"-colocated", "-train-time", "-eval-every", `phase "rollout"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
