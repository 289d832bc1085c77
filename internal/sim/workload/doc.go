// Package workload generates the requests of a simulated fleet's workloads: GRPO batches,
// Poisson arrivals, and the requests of the colocated and async RL loops, which the fleet model
// (fleetmodel) runs beside its engines.
package workload
