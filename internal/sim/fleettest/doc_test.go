// Package fleettest checks a whole simulated fleet over HTTP: the completion endpoints, the
// control calls that drive it, and the bounds a request is checked against.
package fleettest
