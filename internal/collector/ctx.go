package collector

import "context"

// contextFor is the context given to sinks called from the collector goroutine. Sinks that may
// block get their own queue (see package sink); this one is never cancelled.
func contextFor(*state) context.Context { return context.Background() }
