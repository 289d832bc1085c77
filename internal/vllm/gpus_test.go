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
