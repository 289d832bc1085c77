// Package fleetmodel is a whole fleet's model without any I/O: its servers' engines, its
// workload, the colocated and async RL loops, restarts, and the requests and control calls of
// clients that drive it, all on one simulated clock. It renders pages only through the
// snap.PageRenderer it is given.
package fleetmodel
