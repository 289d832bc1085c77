package timeline

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

func jsonNumber(x float64) (string, error) {
	b, err := json.Marshal(x)
	return string(b), err
}

func TestResample(t *testing.T) {
	nan := math.NaN()
	p := func(t, v float64) step.Point { return step.Point{OffsetS: t, Value: v} }
	tests := []struct {
		name string
		ps   []step.Point
		dur  float64
		n    int
		want []float64
	}{
		{"one sample per column", []step.Point{p(1, 1), p(2, 2), p(3, 3), p(4, 4)}, 4, 4, []float64{1, 2, 3, 4}},
		{"a sample holds back to the previous one", []step.Point{p(2, 5), p(4, 7)}, 4, 4, []float64{5, 5, 7, 7}},
		{"columns average the samples they hold", []step.Point{p(1, 1), p(2, 3), p(3, 5), p(4, 7)}, 4, 2, []float64{2, 6}},
		{"weighted by how long each held", []step.Point{p(0.5, 4), p(2, 0)}, 2, 1, []float64{1}},
		{"after the last sample there is nothing", []step.Point{p(1, 1)}, 4, 4, []float64{1, nan, nan, nan}},
		{"a sample at the start still shows", []step.Point{p(0, 9)}, 4, 2, []float64{9, nan}},
		{"offsets past the end are clipped", []step.Point{p(1, 1), p(6, 2)}, 2, 2, []float64{1, 2}},
		{"no samples", nil, 2, 2, []float64{nan, nan}},
		{"no duration", []step.Point{p(0, 1)}, 0, 1, []float64{nan}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]float64, tt.n)
			Resample(got, tt.ps, tt.dur)
			for i := range got {
				if math.IsNaN(tt.want[i]) != math.IsNaN(got[i]) || !math.IsNaN(got[i]) && math.Abs(got[i]-tt.want[i]) > 1e-12 {
					t.Fatalf("Resample = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func BenchmarkResample(b *testing.B) {
	ps := make([]step.Point, 120)
	for i := range ps {
		ps[i] = step.Point{OffsetS: 0.5 * float64(i+1), Value: float64(i % 7)}
	}
	out := make([]float64, 80)
	b.ReportAllocs()
	for b.Loop() {
		Resample(out, ps, 60)
	}
}

func TestGridSpread(t *testing.T) {
	p := func(t, v float64) step.Point { return step.Point{OffsetS: t, Value: v} }
	rows := Grid([][]step.Point{
		{p(1, 0), p(2, 10)},
		{p(1, 4), p(2, 20)},
		{p(1, 2)}, // stopped after 1 s
	}, 2, 2)
	if len(rows) != 3 || rows[2][0] != 2 || !math.IsNaN(rows[2][1]) {
		t.Fatalf("Grid = %v", rows)
	}
	b := Spread(rows)
	want := Band{Min: []float64{0, 10}, Max: []float64{4, 20}, Mean: []float64{2, 15}, P95: []float64{3.8, 19.5}}
	for c := range 2 {
		for _, f := range []struct {
			name      string
			got, want float64
		}{{"min", b.Min[c], want.Min[c]}, {"max", b.Max[c], want.Max[c]}, {"mean", b.Mean[c], want.Mean[c]}, {"p95", b.P95[c], want.P95[c]}} {
			if math.Abs(f.got-f.want) > 1e-9 {
				t.Errorf("column %d %s = %v, want %v", c, f.name, f.got, f.want)
			}
		}
	}
	if b := Spread([][]float64{{math.NaN()}}); !math.IsNaN(b.Mean[0]) {
		t.Errorf("a column without values has mean %v", b.Mean[0])
	}
}
