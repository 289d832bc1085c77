package page

import "math"

// keptRaws are a page's raws as a Parser keeps them between scrapes, for a partial read of the
// next page: without their values, which the next page gives, and with their strings and
// bounds as numbers in small tables, since a page has few of them and a Parser is kept per
// target for as long as it is scraped.
type keptRaws struct {
	raws    []keptRaw
	strs    []string  // series keys and split label values
	les     []float64 // bucket bounds
	workers []workerKey
}

type keptRaw struct{ meta, worker, key, reason, le uint16 }

// keptMax is the largest number a keptRaw holds; tests lower it to read raws from the lines.
var keptMax = math.MaxUint16

// keepRaws returns raws as a Parser keeps them, or nil when a page has more metas, workers,
// strings or bounds than the numbers hold: the raws are then read again from the page's lines.
func keepRaws(raws []raw, workers []workerKey) *keptRaws {
	if len(workers) > keptMax+1 {
		return nil
	}
	kr := &keptRaws{raws: make([]keptRaw, len(raws)), workers: append([]workerKey(nil), workers...)}
	strs := map[string]int{}
	les := map[uint64]int{}
	str := func(s string) int {
		i, ok := strs[s]
		if !ok {
			i = len(kr.strs)
			strs[s] = i
			kr.strs = append(kr.strs, s)
		}
		return i
	}
	var last raw // consecutive raws mostly share their key, reason or bound
	key, reason, le := -1, -1, -1
	for k, r := range raws {
		if le < 0 || math.Float64bits(r.le) != math.Float64bits(last.le) {
			bits := math.Float64bits(r.le)
			var ok bool
			if le, ok = les[bits]; !ok {
				le = len(kr.les)
				les[bits] = le
				kr.les = append(kr.les, r.le)
			}
		}
		if key < 0 || r.key != last.key {
			key = str(r.key)
		}
		if reason < 0 || r.reason != last.reason {
			reason = str(r.reason)
		}
		last = r
		if int(r.meta) > keptMax || max(key, reason, le) > keptMax {
			return nil
		}
		kr.raws[k] = keptRaw{meta: uint16(r.meta), worker: uint16(r.worker), key: uint16(key), reason: uint16(reason), le: uint16(le)}
	}
	kr.strs = append([]string(nil), kr.strs...)
	kr.les = append([]float64(nil), kr.les...)
	return kr
}

// raw returns the k-th raw kept, with value 0.
func (kr *keptRaws) raw(k int) raw {
	r := kr.raws[k]
	return raw{meta: int32(r.meta), worker: int32(r.worker), key: kr.strs[r.key], reason: kr.strs[r.reason], le: kr.les[r.le]}
}
