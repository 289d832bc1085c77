package serve

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// The weight version endpoints of the simulated servers. A vLLM server of a fleet that syncs
// weights runs in dev mode and answers GET /weight_info with {"weight_version": "<N>"}, null
// before its first load (vllm/entrypoints/serve/dev/rlhf/api_router.py); other vLLM servers
// have no such endpoint. An SGLang server answers GET /model_info with its model and its
// weight_version, "default" (SGLang's --weight-version default) before its first load; the
// older /weight_version and /get_weight_version answer 404, as on current servers.
//
// A server answers one version for all its engines, while with data parallelism each engine
// loads at its own time: it answers the lowest version among its engines, and none (null,
// "default") while any of them has none. So a reader of the endpoint never takes an engine for
// newer than it is; Sim.GroundTruth keeps every engine's own versions. Of the faults, only a
// down one (the port closed) reaches these endpoints.

// With Config.VersionTag the answers are strings, as vLLM's and SGLang's current servers keep
// the version: "default" before the first load on both (vllm/v1/engine/core.py sets
// _weight_version = "default"; SGLang's --weight-version defaults to it), then the tag and the
// number, such as "step-3".

// versionAPI is the version endpoint a server answers.
type versionAPI uint8

const (
	noVersionAPI versionAPI = iota
	vllmWeightInfo
	sglangModelInfo
)

// versionAPIOf returns the version endpoint the servers of a fleet of c answer.
func versionAPIOf(c fleetconfig.Config) versionAPI {
	if c.Engine == fleetconfig.EngineSGLang {
		return sglangModelInfo
	}
	if r, err := snap.ParseRelease(c.Version); err == nil && r.SleepState && c.SyncsWeights() {
		return vllmWeightInfo
	}
	return noVersionAPI
}

// serverVersion is the version a server of these engines answers, NoVersion for none.
func ServerVersion(engines []snap.EngineStats) int {
	v := snap.NoVersion
	for i := range engines {
		e := engines[i].CurrentVersion()
		if e == snap.NoVersion {
			return snap.NoVersion
		}
		if i == 0 || e < v {
			v = e
		}
	}
	return v
}

func (s *Server) handleVersions(mux *http.ServeMux) {
	switch s.versions {
	case vllmWeightInfo:
		mux.HandleFunc("GET /weight_info", s.handleWeightInfo)
	case sglangModelInfo:
		mux.HandleFunc("GET /model_info", s.handleModelInfo)
		for _, p := range []string{"GET /weight_version", "GET /get_weight_version"} {
			mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": "deprecated, use /model_info"})
			})
		}
	}
}

// version returns the server's answer now.
func (s *Server) version() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ServerVersion(s.state.Engines)
}

func (s *Server) handleWeightInfo(w http.ResponseWriter, _ *http.Request) {
	begin := s.clock.Now()
	var body struct {
		WeightVersion *string `json:"weight_version"`
	}
	if v := s.version(); v != snap.NoVersion || s.versionTag != "" {
		str := s.versionString(v)
		body.WeightVersion = &str
	}
	writeJSON(w, http.StatusOK, body)
	s.count(func(h *snap.HttpStats) { h.WeightInfo++ }, begin)
}

func (s *Server) handleModelInfo(w http.ResponseWriter, _ *http.Request) {
	version := s.versionString(s.version())
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path":                s.model,
		"tokenizer_path":            s.model,
		"is_generation":             true,
		"preferred_sampling_params": nil,
		"weight_version":            version,
	})
}

// versionString is the string a server answers for version v: "default" for none.
func (s *Server) versionString(v int) string {
	if v == snap.NoVersion {
		return "default"
	}
	return s.versionTag + strconv.Itoa(v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v) // maps and structs of strings: nothing that fails
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}
