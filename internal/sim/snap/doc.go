// Package snap is what the simulated engines show to the page writers, and all a page writer
// reads of the model: an engine's counters, gauges and histograms as a plain value (Stats), one
// server's page state (PageState), the interface every page writer implements (PageRenderer),
// and the facts of a vLLM release both sides depend on (Release). It holds no metric names.
package snap
