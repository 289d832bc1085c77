package config

import (
	"math"
	"strings"
	"testing"
)

// TestWholeNumbersAreDecimal: every whole-number key reads decimal digits, leading zeros as
// decimal (YAML 1.1 would read 010 as octal 8), and refuses a 0x, 0b or 0o prefix, naming the
// key and its line.
func TestWholeNumbersAreDecimal(t *testing.T) {
	c, err := Parse([]byte("targets: [h:8000]\nmax_body_bytes: 0100\nmax_series_per_target: 000120\nmax_workers_per_target: 09\n"))
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != 100 || c.MaxSeriesPerTarget != 120 || c.MaxWorkersPerTarget != 9 {
		t.Errorf("max_body_bytes %d, max_series_per_target %d, max_workers_per_target %d; want 100, 120, 9",
			c.MaxBodyBytes, c.MaxSeriesPerTarget, c.MaxWorkersPerTarget)
	}
	_, err = Parse([]byte("targets: [h:8000]\nmax_body_bytes: 0x100\nmax_series_per_target: 0b11\nmax_workers_per_target: 0o7\n"))
	for _, want := range []string{
		`max_body_bytes (line 2): "0x100" is not allowed: must be a whole number in decimal digits: 0x, 0b and 0o prefixes are not read`,
		`max_series_per_target (line 3): "0b11" is not allowed: must be a whole number in decimal digits`,
		`max_workers_per_target (line 4): "0o7" is not allowed: must be a whole number in decimal digits`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v\nwant %q", err, want)
		}
	}
}

// TestSettingsAreFinite: a number setting refuses .inf, -.inf and .nan, which YAML reads as
// numbers: peak_tflops_per_gpu: .inf made every MFU 0 and .nan dropped MFU without a word. All
// are told at once, with their keys and lines.
func TestSettingsAreFinite(t *testing.T) {
	_, err := Parse([]byte("targets: [h:8000]\npeak_tflops_per_gpu: .inf\npeak_gbps_per_gpu: .nan\nvllm_metrics_logger_interval: -.inf\n"))
	for _, want := range []string{
		`peak_tflops_per_gpu (line 2): ".inf" is not allowed: must be a finite number`,
		`peak_gbps_per_gpu (line 3): ".nan" is not allowed: must be a finite number`,
		`vllm_metrics_logger_interval (line 4): "-.inf" is not allowed: must be a finite number`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v\nwant %q", err, want)
		}
	}
	// A whole number in a number setting is decimal too.
	c, err := Parse([]byte("targets: [h:8000]\npeak_tflops_per_gpu: 0989\n"))
	if err != nil || c.PeakTFLOPS != 989 {
		t.Errorf("peak_tflops_per_gpu: 0989 read as %v, %v; want 989", c.PeakTFLOPS, err)
	}
	_, err = Parse([]byte("targets: [h:8000]\npeak_gbps_per_gpu: 0x10\n"))
	if err == nil || !strings.Contains(err.Error(), `peak_gbps_per_gpu (line 2): "0x10" is not allowed: must be a whole number in decimal digits`) {
		t.Errorf("peak_gbps_per_gpu: 0x10: %v", err)
	}
}

// TestValidateRefusesNonFinitePeaks: Validate checks the peaks however they were set (a
// program's Config, not only a file's), naming the keys together.
func TestValidateRefusesNonFinitePeaks(t *testing.T) {
	c := Default()
	c.Targets = TargetsOf([]string{"h:8000"})
	c.PeakTFLOPS = math.Inf(1)
	c.PeakGBps = math.NaN()
	err := c.Validate()
	for _, want := range []string{"peak_tflops_per_gpu: +Inf is not allowed", "peak_gbps_per_gpu: NaN is not allowed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nwant %q", err, want)
		}
	}
}

// TestGPUReportedName: gpu takes the name the GPU reports (torch.cuda.get_device_name(),
// nvidia-smi), which was refused as unknown; an unknown one still lists the known names.
func TestGPUReportedName(t *testing.T) {
	c, err := Parse([]byte("targets: [h:8000]\ngpu: NVIDIA H100 80GB HBM3\n"))
	if err == nil {
		err = c.Validate()
	}
	if err != nil || c.Peak().TFLOPS != 989 || c.Peak().GBps != 3350 {
		t.Errorf("gpu: NVIDIA H100 80GB HBM3: peak %v, %v; want the H100 SXM's", c.Peak(), err)
	}
	c, _ = Parse([]byte("targets: [h:8000]\ngpu: NVIDIA H100 PCIe\n"))
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `gpu: unknown GPU "NVIDIA H100 PCIe"; known: H100, H200, B200, A100, A100-40GB, MI300X`) || !strings.Contains(err.Error(), "(line 2)") {
		t.Errorf("gpu: NVIDIA H100 PCIe: %v", err)
	}
}
