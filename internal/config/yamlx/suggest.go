package yamlx

// Suggest returns the key of keys closest to key when it is close enough to be a likely typo
// (one or two letters added, dropped, changed or swapped, fewer than a third of the key), else "".
func Suggest(key string, keys []string) string {
	best, bestD := "", 3
	for _, k := range keys {
		d := distance(key, k)
		if d < bestD && d*3 <= max(len(key), len(k)) {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the optimal string alignment distance: insertions, deletions, substitutions and
// swaps of neighbours, each costing one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
