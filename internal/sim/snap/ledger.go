package snap

// NoVersion is the version of an engine that has loaded none since it (re)started: vLLM's
// /weight_info answers null, SGLang's /model_info "default".
const NoVersion = -1

// version returns the engine's weight version, NoVersion without one.
func (s *EngineStats) CurrentVersion() int {
	if !s.HasVersion {
		return NoVersion
	}
	return s.Version
}
