package fleetmodel

// busy reports whether server's engines hold requests.
func (s *Sim) Busy(server int) bool {
	for _, e := range s.Servers[server].Engines {
		if e.Busy() || e.Pending() {
			return true
		}
	}
	return false
}
