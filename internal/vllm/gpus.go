package vllm

import (
	"fmt"
	"slices"
	"strings"
)

// Peak is what one GPU can do at most: dense BF16 tensor throughput and memory bandwidth, the
// denominators of MFU and MBU. A zero field is unknown, and its utilisation is not computed.
type Peak struct {
	TFLOPS float64 // 10^12 floating point operations per second
	GBps   float64 // 10^9 bytes per second
}

// gpus are the known GPUs' peaks, dense (no sparsity) BF16, from the vendors' data sheets:
//   - NVIDIA H100 Tensor Core GPU data sheet: H100 SXM 989 TFLOP/s (1,979 with sparsity),
//     3.35 TB/s;
//   - NVIDIA H200 Tensor Core GPU data sheet: H200 SXM 989 TFLOP/s, 4.8 TB/s;
//   - NVIDIA HGX B200 specifications: 2.25 PFLOP/s dense per GPU (4.5 with sparsity), 8 TB/s;
//   - NVIDIA A100 Tensor Core GPU data sheet: 312 TFLOP/s; 80 GB SXM 2,039 GB/s, 40 GB SXM
//     1,555 GB/s;
//   - AMD Instinct MI300X data sheet: 1,307.4 TFLOP/s, 5.3 TB/s.
//
// Names are matched without case, spaces, "-" or "_", and without a leading "NVIDIA" or "AMD
// Instinct"; the first name of each is its own. Each also has the name the part reports, which
// torch.cuda.get_device_name() and nvidia-smi (or ROCm's) print: "NVIDIA H100 80GB HBM3" is the
// H100 SXM5, "NVIDIA A100-SXM4-80GB" the A100 SXM. A name is an entry's only when the part's
// data sheet figures are the entry's: the A100 40GB PCIe (A100-PCIE-40GB) has the 40 GB SXM's
// 312 TFLOP/s and 1,555 GB/s. Parts of another form factor with other peaks are not in the
// table, and are refused rather than taken for the SXM part: H100 PCIe and H100 NVL, H200 NVL
// (other clocks, memory or both), A100 80GB PCIe (1,935 GB/s); peak_tflops_per_gpu and
// peak_gbps_per_gpu give theirs.
var gpus = []struct {
	names []string
	peak  Peak
}{
	{[]string{"H100", "H100-SXM", "H100-SXM5", "H100 80GB HBM3"}, Peak{989, 3350}},
	{[]string{"H200", "H200-SXM"}, Peak{989, 4800}},
	{[]string{"B200"}, Peak{2250, 8000}},
	{[]string{"A100", "A100-80GB", "A100-SXM", "A100-SXM4-80GB"}, Peak{312, 2039}},
	{[]string{"A100-40GB", "A100-SXM4-40GB", "A100-PCIE-40GB"}, Peak{312, 1555}},
	{[]string{"MI300X"}, Peak{1307.4, 5300}},
}

// vendors are the prefixes of the names GPUs report, as gpuKey spells them.
var vendors = []string{"NVIDIA", "AMDINSTINCT"}

// gpuKey is how a GPU's name is matched: upper case, without spaces, "-" or "_", and without
// the vendor's prefix.
func gpuKey(s string) string {
	k := strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '_' {
			return -1
		}
		return r
	}, strings.ToUpper(s))
	for _, v := range vendors {
		if rest, ok := strings.CutPrefix(k, v); ok && rest != "" {
			return rest
		}
	}
	return k
}

// GPUNames lists the GPUs GPUPeak knows, by their own names.
func GPUNames() []string {
	out := make([]string, len(gpus))
	for i, g := range gpus {
		out[i] = g.names[0]
	}
	return out
}

// GPUPeak returns the peak of a GPU by name (H100, h100-sxm, "NVIDIA H100 80GB HBM3", MI300X,
// ...), or an error that lists the known ones.
func GPUPeak(name string) (Peak, error) {
	n := gpuKey(name)
	for _, g := range gpus {
		if slices.ContainsFunc(g.names, func(s string) bool { return gpuKey(s) == n }) {
			return g.peak, nil
		}
	}
	return Peak{}, fmt.Errorf("unknown GPU %q; known: %s (or give peak_tflops_per_gpu and peak_gbps_per_gpu)", name, strings.Join(GPUNames(), ", "))
}
