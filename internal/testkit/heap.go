package testkit

import "runtime"

// HeapAfterGC runs a collection and returns the memory statistics after it, for tests and
// benchmarks that compare the heap before and after some work.
func HeapAfterGC() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
