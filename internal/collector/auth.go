package collector

import (
	"github.com/vllmstat/vllmstat/internal/target"
)

// withAuth returns ts with auth(url) given to each target that comes without credentials of its
// own and is not a target already (setTargets keeps the credentials such a target has). ts is
// copied before it is changed: it is the caller's. A nil auth gives none.
func (s *state) withAuth(ts []target.Target, auth func(url string) target.Auth) []target.Target {
	if auth == nil {
		return ts
	}
	var out []target.Target
	for i := range ts {
		if !ts[i].Auth.IsZero() {
			continue
		}
		if _, ok := s.pool.Generation(ts[i].URL); ok {
			continue
		}
		a := auth(ts[i].URL)
		if a.IsZero() {
			continue
		}
		if out == nil {
			out = append([]target.Target(nil), ts...)
		}
		out[i].Auth = a
	}
	if out == nil {
		return ts
	}
	return out
}

// discoveredAuth is what a target that discovery finds without credentials of its own gets.
func (s *state) discoveredAuth(string) target.Auth { return s.c.opt.DefaultAuth }
