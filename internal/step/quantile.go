package step

// countsFinite reports whether a histogram's count and bucket counts are all finite.
func countsFinite(d *histAcc) bool {
	if !finite(d.count) {
		return false
	}
	for _, c := range d.counts {
		if !finite(c) {
			return false
		}
	}
	return true
}
