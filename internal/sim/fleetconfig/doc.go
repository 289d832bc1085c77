// Package fleetconfig describes a simulated fleet (Config) and its faults, and checks a
// description whole, naming every setting that is wrong.
package fleetconfig
