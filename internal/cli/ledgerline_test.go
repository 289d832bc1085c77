package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// TestLedgerLine: the line names the states with time in the ledger's order with their share of
// the engine-seconds, a sliver as "<1%", and nothing without engine time; an SGLang table reads
// the sglang/ keys only.
func TestLedgerLine(t *testing.T) {
	colocated := map[string]float64{
		"vllm/time/engine_s":                   40,
		"vllm/time/generating_fraction":        0.62,
		"vllm/time/idle_fraction":              0.08,
		"vllm/time/asleep_fraction":            0.2,
		"vllm/time/waking_fraction":            0.0275,
		"vllm/time/paused_fraction":            0,
		"vllm/time/loading_weights_fraction":   0.0685,
		"vllm/time/unreachable_fraction":       0.004,
		"sglang/time/engine_s":                 10,
		"sglang/time/generating_fraction":      0.5,
		"sglang/time/paused_fraction":          0.25,
		"sglang/time/loading_weights_fraction": 0.25,
	}
	tests := []struct {
		name string
		m    map[string]float64
		kind vllm.Engine
		want string
	}{
		{"colocated", colocated, vllm.VLLM, "time gen 62% idle 8% asleep 20% waking 3% load 7% unreachable <1%"},
		{"sglang", colocated, vllm.SGLang, "time gen 50% paused 25% load 25%"},
		{"sglang undetermined", map[string]float64{"sglang/time/engine_s": 10, "sglang/time/generating_fraction": 0.1,
			"sglang/time/idle_fraction": 0.2, "sglang/time/undetermined_fraction": 0.7}, vllm.SGLang, "time gen 10% idle 20% undetermined 70%"},
		{"no engine time", map[string]float64{"vllm/time/engine_s": 0, "vllm/time/idle_fraction": 1}, vllm.VLLM, ""},
		{"no ledger keys", map[string]float64{"vllm/generation_tokens": 10}, vllm.VLLM, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ledgerLine(tt.m, "vllm", tt.kind); got != tt.want {
				t.Errorf("ledgerLine = %q, want %q", got, tt.want)
			}
		})
	}
	for s := range step.NumStates {
		if ledgerNames[s] == "" {
			t.Errorf("state %s has no name on the ledger line", s)
		}
	}
}

// TestTableLedgerLine: the table prints a step's ledger line under its row, from the secs column
// on, and none for a step without engine time; the rows around it are unchanged.
func TestTableLedgerLine(t *testing.T) {
	rec := step.Record{Step: 3, DurationS: 20, Workers: 2, Metrics: map[string]float64{
		"vllm/time/engine_s": 40, "vllm/time/generating_fraction": 0.75, "vllm/time/idle_fraction": 0.25}}
	plain := step.Record{Step: 4, DurationS: 20, Workers: 2, Metrics: map[string]float64{}}
	var b bytes.Buffer
	tab := newStepTable(&b, "vllm")
	tab.row(&rec)
	tab.row(&plain)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want the header, two rows and one ledger line:\n%s", len(lines), b.String())
	}
	if want := "     time gen 75% idle 25%"; lines[2] != want {
		t.Errorf("ledger line %q, want %q\n%s", lines[2], want, b.String())
	}
	if !strings.HasPrefix(lines[1], "   3 ") || !strings.HasPrefix(lines[3], "   4 ") {
		t.Errorf("rows out of place:\n%s", b.String())
	}
	if rows := tableRows(t, b.String()); len(rows) != 2 || rows[3]["secs"] != "20.0" || rows[4]["secs"] != "20.0" {
		t.Errorf("rows around a ledger line: %v", rows)
	}
}
