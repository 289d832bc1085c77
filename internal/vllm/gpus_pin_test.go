package vllm

import (
	"math"
	"testing"
)

// TestGPUPeaksFromDataSheets pins every GPU of the table, by each of its names, to the dense
// BF16 tensor throughput and the memory bandwidth of the vendor's data sheet, written here from
// the data sheets rather than from the table. Where a sheet gives the figure with 2:4 sparsity
// only, the dense one is half of it: a sparse figure in the table would halve every MFU of that
// GPU. The sheets round their figures: 0.1% is allowed.
func TestGPUPeaksFromDataSheets(t *testing.T) {
	sheets := map[string]Peak{
		// NVIDIA H100 Tensor Core GPU data sheet, H100 SXM: BF16 1,979 TFLOP/s with sparsity;
		// 3.35 TB/s.
		"H100": {1979.0 / 2, 3350},
		// NVIDIA H200 Tensor Core GPU data sheet, H200 SXM: BF16 1,979 TFLOP/s with sparsity;
		// 4.8 TB/s.
		"H200": {1979.0 / 2, 4800},
		// NVIDIA HGX B200 specifications, per GPU: FP16/BF16 4.5 PFLOP/s with sparsity; 8 TB/s
		// (the DGX B200's 64 TB/s over its 8 GPUs).
		"B200": {4500.0 / 2, 8000},
		// NVIDIA A100 Tensor Core GPU data sheet: BF16 312 TFLOP/s dense (624 with sparsity);
		// 80 GB SXM 2,039 GB/s, 40 GB SXM 1,555 GB/s.
		"A100":      {312, 2039},
		"A100-40GB": {312, 1555},
		// AMD Instinct MI300X data sheet: peak BF16 1,307.4 TFLOP/s dense (2,614.9 with
		// sparsity); 5.3 TB/s.
		"MI300X": {1307.4, 5300},
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-3*want }
	for _, g := range gpus {
		own := g.names[0]
		want, ok := sheets[own]
		if !ok {
			t.Errorf("%s: no data sheet figures in this test; add them, dense, from the vendor's sheet", own)
			continue
		}
		for _, name := range g.names {
			got, err := GPUPeak(name)
			if err != nil || !near(got.TFLOPS, want.TFLOPS) || !near(got.GBps, want.GBps) {
				t.Errorf("GPUPeak(%q) = %+v, %v; want %.1f TFLOP/s dense and %v GB/s (%s's data sheet)", name, got, err, want.TFLOPS, want.GBps, own)
			}
		}
	}
	for own := range sheets {
		if _, err := GPUPeak(own); err != nil {
			t.Errorf("%s is no longer in the table: %v", own, err)
		}
	}
}
