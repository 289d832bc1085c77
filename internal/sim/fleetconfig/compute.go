package fleetconfig

import (
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// shapes reports whether a fleet of cfg on pages of release r has the families above.
func (c Config) Shapes(r snap.Release) bool { return c.Engine != EngineSGLang && r.Name == "0.20" }
