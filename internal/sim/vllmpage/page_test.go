package vllmpage

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// busyPage renders server 0's page of version after a few seconds of the default workload, so
// that every counter and histogram has values.
func busyPage(t testing.TB, version string) []byte {
	t.Helper()
	cfg := simtest.VersionConfig(version)
	s := mustSim(t, cfg)
	s.AdvanceTo(6 * time.Second)
	return s.Page(0, simtest.Start)
}

func TestPageParsesWithExpfmt(t *testing.T) {
	for _, version := range []string{"0.20", "0.10", "0.8"} {
		t.Run(version, func(t *testing.T) {
			fams := simtest.ParsePage(t, busyPage(t, version))
			want := map[string]dto.MetricType{
				"vllm:num_requests_running":           dto.MetricType_GAUGE,
				"vllm:num_preemptions_total":          dto.MetricType_COUNTER,
				"vllm:num_preemptions_created":        dto.MetricType_GAUGE,
				"vllm:request_success_total":          dto.MetricType_COUNTER,
				"vllm:time_to_first_token_seconds":    dto.MetricType_HISTOGRAM,
				"vllm:iteration_tokens_total":         dto.MetricType_HISTOGRAM,
				"vllm:cache_config_info":              dto.MetricType_GAUGE,
				"process_cpu_seconds_total":           dto.MetricType_COUNTER,
				"http_request_duration_highr_seconds": dto.MetricType_HISTOGRAM,
			}
			for name, typ := range want {
				f := fams[name]
				if f == nil || f.GetType() != typ {
					t.Errorf("%s: got %v, want a %v family", name, f.GetType(), typ)
				}
			}
			engines := 2
			if version == "0.8" {
				engines = 1
			}
			if n := len(fams["vllm:time_to_first_token_seconds"].Metric); n != engines {
				t.Errorf("ttft has %d children, want %d", n, engines)
			}
			h := fams["vllm:time_to_first_token_seconds"].Metric[0].Histogram
			if h.GetSampleCount() == 0 || h.Bucket[len(h.Bucket)-1].GetCumulativeCount() != h.GetSampleCount() {
				t.Errorf("ttft histogram empty or inconsistent: %v", h)
			}
		})
	}
}

// TestPromtoolAcceptsPages runs `promtool check metrics` on each version's page. Its only
// complaints may be lint about names vLLM itself chose: the colon in every vllm: name, and the
// "_total" suffix of the histogram vllm:iteration_tokens_total. A parse error (exit status 1) or
// any other lint fails the test.
func TestPromtoolAcceptsPages(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool not found on PATH; install it (Debian: apt-get install -y prometheus) to run this test"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, NOT PASSED: " + msg)
	}
	allowed := func(line string) bool {
		return strings.HasPrefix(line, "vllm:") && strings.HasSuffix(line, " metric names should not contain ':'") ||
			line == `vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix`
	}
	for _, version := range []string{"0.20", "0.10", "0.8"} {
		t.Run(version, func(t *testing.T) {
			cmd := exec.Command(path, "check", "metrics")
			cmd.Stdin = bytes.NewReader(busyPage(t, version))
			out, err := cmd.CombinedOutput()
			if exit, ok := err.(*exec.ExitError); err != nil && (!ok || exit.ExitCode() != 3) {
				t.Fatalf("promtool check metrics failed (%v), not just lint:\n%s", err, out)
			}
			n := 0
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if line != "" && !allowed(line) {
					t.Errorf("promtool: %s", line)
				}
				n++
			}
			t.Logf("%d allowed lint lines", n)
		})
	}
}
