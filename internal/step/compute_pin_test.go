package step

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// computePage is a vLLM page of engines, each given as its running requests and its compute
// counters: FLOPs, bytes read, bytes written.
func computePage(engines ...[4]float64) string {
	var b strings.Builder
	for i, e := range engines {
		lbl := fmt.Sprintf(`engine="%d",model_name="m"`, i)
		fmt.Fprintf(&b, "vllm:num_requests_running{%s} %v\n", lbl, e[0])
		fmt.Fprintf(&b, "vllm:estimated_flops_per_gpu_total{%s} %v\n", lbl, e[1])
		fmt.Fprintf(&b, "vllm:estimated_read_bytes_per_gpu_total{%s} %v\n", lbl, e[2])
		fmt.Fprintf(&b, "vllm:estimated_write_bytes_per_gpu_total{%s} %v\n", lbl, e[3])
	}
	return b.String()
}

// TestComputeGenerating: engines that generate while their compute counters move get the
// TFLOP/s per GPU over the step's time and over their generating time, and the MFU of each,
// beside the bandwidth and MBU over the step. Scrapes once a second over a 4 s step:
//
//	t  engine 0              engine 1
//	1  running, 2e14 FLOPs   running, 1e14 FLOPs
//	2  running, 2e14 FLOPs   idle
//	3  idle                  idle
//	4  idle                  idle
//
// The generating keys divide the FLOPs (5e14) by the engines' 3 s of generating, the others by
// the step's 4 s and the 2 GPUs.
func TestComputeGenerating(t *testing.T) {
	peak := vllm.Peak{TFLOPS: 1000, GBps: 4000}
	tr := NewTracker(Options{PerWorker: true, Peak: peak})
	tr.Begin(at(0))
	for i, pg := range []string{
		computePage([4]float64{0, 0, 0, 0}, [4]float64{0, 0, 0, 0}),
		computePage([4]float64{1, 2e14, 4e12, 2e12}, [4]float64{1, 1e14, 2e12, 1e12}),
		computePage([4]float64{1, 4e14, 8e12, 4e12}, [4]float64{0, 1e14, 2e12, 1e12}),
		computePage([4]float64{0, 4e14, 8e12, 4e12}, [4]float64{0, 1e14, 2e12, 1e12}),
		computePage([4]float64{0, 4e14, 8e12, 4e12}, [4]float64{0, 1e14, 2e12, 1e12}),
	} {
		observeText(t, tr, float64(i), pg)
	}
	r := tr.EndStep(1, at(4))
	m := r.Metrics
	want(t, m, "vllm/time/generating_s", 3)
	want(t, m, "vllm/"+NameTFLOPS, 5e14/2/4/1e12)           // 62.5
	want(t, m, "vllm/"+NameMFU, 5e14/2/4/1e12/1000)         // 0.0625
	want(t, m, "vllm/"+NameTFLOPSGenerating, 5e14/3/1e12)   // 166.7
	want(t, m, "vllm/"+NameMFUGenerating, 5e14/3/1e12/1000) // 0.1667
	want(t, m, "vllm/"+NameReadGBps, 10e12/2/4/1e9)         // 1250
	want(t, m, "vllm/"+NameWriteGBps, 5e12/2/4/1e9)         // 625
	want(t, m, "vllm/"+NameMBU, (1250.0+625)/4000)
	// Each engine's own: engine 0 generated 2 s, engine 1 1 s.
	own := map[string]struct{ flops, gen float64 }{"0": {4e14, 2}, "1": {1e14, 1}}
	if len(r.PerWorker) != 2 {
		t.Fatalf("%d per_worker records, want 2", len(r.PerWorker))
	}
	for _, w := range r.PerWorker {
		flops, gen := own[w.Engine].flops, own[w.Engine].gen
		want(t, w.Metrics, "vllm/"+NameTFLOPSGenerating, flops/gen/1e12)
		want(t, w.Metrics, "vllm/"+NameMFUGenerating, flops/gen/1e12/1000)
		want(t, w.Metrics, "vllm/"+NameTFLOPS, flops/4/1e12)
	}
}
