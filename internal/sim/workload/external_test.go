package workload

import (
	"testing"
)

// A dataset of two batches' questions comes back in the third batch, in the same order and on
// the same engines; without a dataset no question repeats.
func TestDatasetEpochs(t *testing.T) {
	for _, dataset := range []int{0, 64} {
		w := DefaultWorkload()
		w.Prompts, w.Dataset = 32, dataset
		g := NewGenerator(w, 4, 4096, 1)
		b1, b2, b3 := g.Batch(1, 0), g.Batch(2, 0), g.Batch(3, 0)
		seen := map[uint64]bool{}
		for _, rs := range append(b1, b2...) {
			seen[rs.Spec.QuestionSeed] = true
		}
		repeats := 0
		for i, rs := range b3 {
			if seen[rs.Spec.QuestionSeed] {
				repeats++
				if rs.Spec.QuestionSeed != b1[i].Spec.QuestionSeed || rs.Engine != b1[i].Engine {
					t.Errorf("dataset %d: request %d of batch 3 repeats another question or engine than batch 1's", dataset, i)
				}
			}
		}
		if want := map[int]int{0: 0, 64: len(b3)}[dataset]; repeats != want {
			t.Errorf("dataset %d: %d of batch 3's %d requests repeat a question, want %d", dataset, repeats, len(b3), want)
		}
	}
}
