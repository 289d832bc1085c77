package vllm

import (
	"strings"
	"testing"
)

func TestGPUPeak(t *testing.T) {
	for name, want := range map[string]Peak{"H100": {989, 3350}, "h100-sxm": {989, 3350}, "a100_40gb": {312, 1555}, "MI300X": {1307.4, 5300}} {
		if got, err := GPUPeak(name); err != nil || got != want {
			t.Errorf("GPUPeak(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	_, err := GPUPeak("H1OO")
	if err == nil || !strings.Contains(err.Error(), `"H1OO"`) || !strings.Contains(err.Error(), "H100, H200, B200, A100, A100-40GB, MI300X") {
		t.Errorf("unknown GPU: %v", err)
	}
}

// TestGPUPeakReportedNames: the names the GPU reports (torch.cuda.get_device_name(), the same
// as nvidia-smi's) give its entry, in any case and with or without the vendor; a part of
// another form factor, whose peaks differ, is not taken for the one of the table.
func TestGPUPeakReportedNames(t *testing.T) {
	for name, want := range map[string]Peak{
		"NVIDIA H100 80GB HBM3": {989, 3350},
		"nvidia h100 80gb hbm3": {989, 3350},
		"H100 80GB HBM3":        {989, 3350},
		"NVIDIA H200":           {989, 4800},
		"NVIDIA B200":           {2250, 8000},
		"NVIDIA A100-SXM4-80GB": {312, 2039},
		"NVIDIA A100-SXM4-40GB": {312, 1555},
		"NVIDIA A100-PCIE-40GB": {312, 1555},
		"AMD Instinct MI300X":   {1307.4, 5300},
		"amd instinct mi300x":   {1307.4, 5300},
		"NVIDIA H100":           {989, 3350},
	} {
		if got, err := GPUPeak(name); err != nil || got != want {
			t.Errorf("GPUPeak(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA A100 80GB PCIe", "NVIDIA GH200 480GB", "NVIDIA"} {
		if p, err := GPUPeak(name); err == nil || !strings.Contains(err.Error(), "known: H100, H200, B200, A100, A100-40GB, MI300X") {
			t.Errorf("GPUPeak(%q) = %v, %v; want unknown, listing the known names", name, p, err)
		}
	}
}
