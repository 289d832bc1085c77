// Package promtext writes the Prometheus text exposition as Python's prometheus_client prints
// it (HELP and TYPE lines, samples, label escaping, float formatting, histogram children), for
// the page writers.
package promtext
