package step

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The compute keys come from the engines' estimates of the floating point operations and the
// bytes of memory traffic of each GPU (vllm.EstFlops, EstReadBytes, EstWriteBytes: counters per
// engine, of one of its GPUs). Over a pool of workers they are means per GPU: the workers'
// increases added up, over the workers that have the family and the step's seconds, or over
// the seconds those workers spent generating (the time ledger's generating state), which
// leaves out the time an engine had no request. With a GPU's peak (Options.Peak) they are
// shares of it: MFU and MBU, the latter of the bytes read and written.
const (
	NameTFLOPS           = "achieved_tflops_per_gpu"
	NameTFLOPSGenerating = "achieved_tflops_per_gpu_generating"
	NameReadGBps         = "achieved_read_gbps_per_gpu"
	NameWriteGBps        = "achieved_write_gbps_per_gpu"
	NameMFU              = "mfu"
	NameMFUGenerating    = "mfu_generating"
	NameMBU              = "mbu"
)

// ComputeNames are the compute keys' names, in the order a record lists them.
var ComputeNames = []string{NameTFLOPS, NameTFLOPSGenerating, NameReadGBps, NameWriteGBps, NameMFU, NameMFUGenerating, NameMBU}

// computeValues are the compute keys over a pool of workers and durS seconds.
func computeValues(was []*workerAcc, durS float64, peak vllm.Peak) []vllm.Value {
	if durS <= 0 {
		return nil
	}
	var sum [3]float64
	var n [3]int
	var generating int64
	for _, wa := range was {
		for i, c := range [...]vllm.Counter{vllm.EstFlops, vllm.EstReadBytes, vllm.EstWriteBytes} {
			if wa.has[c] {
				sum[i] += wa.totals[c]
				n[i]++
				if i == 0 {
					generating += wa.led.ns[Generating]
				}
			}
		}
	}
	var vs []vllm.Value
	add := func(name string, v float64) {
		if finite(v) {
			vs = append(vs, vllm.Value{Name: name, V: v})
		}
	}
	perGPU := func(i int, unit float64) float64 { return sum[i] / float64(n[i]) / durS / unit }
	if n[0] > 0 {
		tf := perGPU(0, 1e12)
		add(NameTFLOPS, tf)
		if peak.TFLOPS > 0 {
			add(NameMFU, tf/peak.TFLOPS)
		}
		if g := time.Duration(generating).Seconds(); g > 0 {
			add(NameTFLOPSGenerating, sum[0]/g/1e12)
			if peak.TFLOPS > 0 {
				add(NameMFUGenerating, sum[0]/g/1e12/peak.TFLOPS)
			}
		}
	}
	if n[1] > 0 {
		add(NameReadGBps, perGPU(1, 1e9))
	}
	if n[2] > 0 {
		add(NameWriteGBps, perGPU(2, 1e9))
	}
	if n[1] > 0 && n[2] > 0 && peak.GBps > 0 {
		add(NameMBU, (perGPU(1, 1e9)+perGPU(2, 1e9))/peak.GBps)
	}
	return vs
}
