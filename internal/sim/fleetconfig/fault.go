package fleetconfig

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultKind names a misbehaviour of a simulated server.
type FaultKind string

// The faults a server can be told to show.
const (
	// FaultRestart restarts the server process: counters and histograms start again from zero
	// with new _created timestamps, its engines' KV caches are empty and the requests in flight
	// on it are lost.
	FaultRestart FaultKind = "restart"
	// FaultDown closes the server's listening port for the fault's duration, so connections are
	// refused, then opens it again.
	FaultDown FaultKind = "down"
	// FaultSlow makes /metrics answer only after Config.SlowDelay during the fault's duration,
	// longer than a scraper's usual timeout.
	FaultSlow FaultKind = "slow"
	// FaultGarbage makes the first /metrics request at or after the fault's time get an HTML
	// error page with status 200 instead of the exposition.
	FaultGarbage FaultKind = "garbage"
)

// Fault is one scheduled misbehaviour. At and Duration are wall-clock offsets from the fleet's
// start (a test that drives a Sim directly reads them as simulated time times Speed).
type Fault struct {
	Kind     FaultKind
	At       time.Duration
	Duration time.Duration // down and slow only
	Server   int           // 0-based server index, or AllServers
}

// AllServers as Fault.Server aims the fault at every server of the fleet.
const AllServers = -1

// String returns the fault in the syntax ParseFault reads.
func (f Fault) String() string {
	s := string(f.Kind) + "@" + f.At.String()
	if f.Duration > 0 {
		s += "+" + f.Duration.String()
	}
	if f.Server != AllServers {
		s += ":server=" + strconv.Itoa(f.Server)
	}
	return s
}

// ParseFault reads a fault written as KIND@AT[+DURATION][:server=N], e.g. "restart@30s",
// "down@30s+10s", "slow@1m+5s:server=1", "garbage@45s". AT and DURATION are Go durations; down
// and slow need a duration, restart and garbage take none. N is the 0-based server index;
// without it the fault hits every server.
func ParseFault(s string) (Fault, error) {
	f := Fault{Server: AllServers}
	spec, target, hasTarget := strings.Cut(s, ":")
	kind, when, ok := strings.Cut(spec, "@")
	if !ok {
		return f, fmt.Errorf("parse fault %q: want KIND@TIME[+DURATION][:server=N]", s)
	}
	f.Kind = FaultKind(kind)
	switch f.Kind {
	case FaultRestart, FaultDown, FaultSlow, FaultGarbage:
	default:
		return f, fmt.Errorf("parse fault %q: unknown kind %q (want restart, down, slow or garbage)", s, kind)
	}
	at, dur, hasDur := strings.Cut(when, "+")
	var err error
	if f.At, err = time.ParseDuration(at); err != nil || f.At < 0 {
		return f, fmt.Errorf("parse fault %q: time %q is not a non-negative duration such as 30s", s, at)
	}
	if hasDur {
		if f.Duration, err = time.ParseDuration(dur); err != nil || f.Duration <= 0 {
			return f, fmt.Errorf("parse fault %q: duration %q is not a positive duration such as 10s", s, dur)
		}
	}
	needsDur := f.Kind == FaultDown || f.Kind == FaultSlow
	if needsDur && !hasDur {
		return f, fmt.Errorf("parse fault %q: %s needs a duration, e.g. %s@%s+10s", s, kind, kind, at)
	}
	if !needsDur && hasDur {
		return f, fmt.Errorf("parse fault %q: %s takes no duration", s, kind)
	}
	if hasTarget {
		v, ok := strings.CutPrefix(target, "server=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return f, fmt.Errorf("parse fault %q: target %q is not server=N with N a 0-based server index", s, target)
		}
		f.Server = n
	}
	return f, nil
}

// hits reports whether the fault applies to server i.
func (f Fault) Hits(i int) bool { return f.Server == AllServers || f.Server == i }

// within reports whether offset t falls in the fault's window.
func (f Fault) Within(t time.Duration) bool { return t >= f.At && t < f.At+f.Duration }
