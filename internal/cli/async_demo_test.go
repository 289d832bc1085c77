package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestAsyncDemo runs the async demo: the trainer publishes version 0 and then one version per
// step, the demo hands every publish to publishPolicy (which logs it and publishes it to the
// collector) and ends step k at the publish of version k, and says what the loop does.
func TestAsyncDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	// The late engine generates on the old weights for --lag after each publish, a second of
	// wall time at --speed 8 with 6 s: scrapes 0.2 s apart see it even on a loaded machine (with
	// 3 s, a cold gate's scrapes once missed every stale token).
	code := demoWith(context.Background(), []string{"--async", "--steps", "3", "--servers", "1", "--dp", "2", "--speed", "8",
		"--lag", "6s", "--interval", "0.2", "--terminal-timelines=false", "--plots=false", "-v", "--out", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	var nums []int64
	var stale, gen float64
	for _, s := range steps {
		nums = append(nums, s.Step)
		if s.Metrics["vllm/generation_tokens"] <= 0 {
			t.Errorf("step %d generated nothing", s.Step)
		}
		if v := s.Metrics["vllm/policy/version"]; v != float64(s.Step) {
			t.Errorf("step %d: policy version %v, want the version published at its end", s.Step, v)
		}
		stale += s.Metrics["vllm/policy/stale_generation_tokens"]
		gen += s.Metrics["vllm/generation_tokens"]
	}
	if !(stale > 0 && stale < gen) { // the engines generate on the old weights until they load the new
		t.Errorf("%v stale tokens of %v", stale, gen)
	}
	if !slices.Equal(nums, []int64{1, 2, 3}) {
		t.Fatalf("steps %v, want 1 to 3\n%s", nums, out.String())
	}
	for _, want := range []string{
		"Async loop: the trainer publishes a new policy version every 10s (simulated); each engine pauses and loads it (2s) at its own time, engine ",
		" 6s late.\n", "a step ends at each publish",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	var versions []string
	for _, m := range regexp.MustCompile(`msg="publish policy" version=(\d+) `).FindAllStringSubmatch(errb.String(), -1) {
		versions = append(versions, m[1])
	}
	if !slices.Equal(versions, []string{"0", "1", "2", "3"}) {
		t.Errorf("publishes handed to vllmstat: %v, want versions 0 to 3", versions)
	}
}

// TestWeightSyncFlags: the loops' timing flags are in both commands' help, and each is refused
// outside its loop, before anything starts.
func TestWeightSyncFlags(t *testing.T) {
	for _, cmd := range []string{"sim", "demo"} {
		var out, errb bytes.Buffer
		run := func(args ...string) int {
			out.Reset()
			errb.Reset()
			if cmd == "sim" {
				return runSim(context.Background(), args, &out, &errb)
			}
			return demoWith(context.Background(), append([]string{"--out", t.TempDir()}, args...), &out, &errb)
		}
		if code := run("-h"); code != exitOK {
			t.Fatalf("%s -h: exit %d", cmd, code)
		}
		for _, want := range []string{"-async", "-step-time", "-lag", "-load-time", "-wake-time"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s help lacks %q", cmd, want)
			}
		}
		if cmd == "sim" && !strings.Contains(out.String(), "/weight_info") {
			t.Errorf("sim help does not name /weight_info")
		}
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--async", "--colocated"}, "the async loop and the colocated loop exclude each other"},
			{[]string{"--lag", "1s"}, "workload step time and lag need the async loop"},
			{[]string{"--step-time", "20s"}, "workload step time and lag need the async loop"},
			{[]string{"--wake-time", "1s"}, "workload wake time 1s needs the colocated loop"},
			{[]string{"--load-time", "1s"}, "workload load time 1s needs the colocated or the async loop"},
			{[]string{"--async", "--step-time", "5s"}, "workload step time 5s must be longer than the lag (3s), the load time (2s) and two handoffs (1s)"},
			{[]string{"--colocated", "--wake-time", "-1s"}, "must not be negative"},
		} {
			if code := run(tt.args...); code != exitUsage || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("%s %v: exit %d, stderr %q, want %q", cmd, tt.args, code, errb.String(), tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("%s %v printed %q before refusing", cmd, tt.args, out.String())
			}
		}
	}
}
