package timeline

import (
	"math"

	"github.com/vllmstat/vllmstat/internal/step"
)

// Grid resamples every worker's series onto the same n columns over [0, durS]: rows[w][c]. The
// rows share one backing array.
func Grid(series [][]step.Point, durS float64, n int) [][]float64 {
	cells := make([]float64, len(series)*n)
	rows := make([][]float64, len(series))
	for w, ps := range series {
		rows[w] = cells[w*n : (w+1)*n : (w+1)*n]
		Resample(rows[w], ps, durS)
	}
	return rows
}

// Band is a fleet's spread per grid column over the workers that have a value there: NaN in
// every field where none has.
type Band struct {
	Min, Max, Mean, P95 []float64
}

// Spread summarises the columns of a grid made by Grid.
func Spread(rows [][]float64) Band {
	n := 0
	if len(rows) > 0 {
		n = len(rows[0])
	}
	all := make([]float64, 4*n)
	b := Band{Min: all[:n:n], Max: all[n : 2*n : 2*n], Mean: all[2*n : 3*n : 3*n], P95: all[3*n:]}
	col := make([]float64, 0, len(rows))
	for c := range n {
		col = col[:0]
		sum := 0.0
		for _, r := range rows {
			if v := r[c]; !math.IsNaN(v) {
				col = append(col, v)
				sum += v
			}
		}
		if len(col) == 0 {
			b.Min[c], b.Max[c], b.Mean[c], b.P95[c] = math.NaN(), math.NaN(), math.NaN(), math.NaN()
			continue
		}
		b.Mean[c] = sum / float64(len(col))
		b.P95[c], _ = step.Percentile(col, 0.95) // sorts col
		b.Min[c], b.Max[c] = col[0], col[len(col)-1]
	}
	return b
}
