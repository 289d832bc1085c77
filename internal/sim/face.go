package sim

// NewSim builds the model of the fleet cfg describes, at simulated time 0, with the page writer
// of its engine.
func NewSim(cfg Config) (*Sim, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	s.SetPages(pageWriter(cfg))
	return s, nil
}

// pageWriter returns a writer of the pages of cfg's servers: SGLang's layout, or the vLLM
// release's (single-process or multiprocess). A new engine's page writer is chosen here.
func pageWriter(cfg Config) pageRenderer {
	if cfg.Engine == EngineSGLang {
		return newSGLangPageWriter(cfg)
	}
	return newVLLMPageWriter(cfg)
}
