package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

// The control endpoints of a driven fleet's servers (workload none), which a trainer calls as
// it calls vLLM's or SGLang's, each applied to every engine of the server at the simulated time
// it arrives and answered once the server's page shows it; a wake-up (--wake-time per half) and
// a weight load (--load-time) are answered when they are over, on the simulated clock.
//
// vLLM (sleep mode and the dev-mode RL endpoints, vllm/entrypoints/serve/dev/rlhf/api_router.py):
// POST /sleep?level=1|2, POST /wake_up (?tags=weights, ?tags=kv_cache, or both without tags),
// GET /is_sleeping, POST /pause (the held requests stay, as mode=keep; mode abort and wait need
// no request in flight), POST /resume, GET /is_paused, POST /start_weight_update, POST
// /update_weights (the transfer, answered when the load has lasted --load-time), POST
// /finish_weight_update {"weight_version"} (which ends the load no earlier), POST
// /update_weight_version {"new_version"}; GET /weight_info is in versions.go.
//
// SGLang (python/sglang/srt/entrypoints/http_server.py): POST /release_memory_occupation and
// /resume_memory_occupation (a sleep at level 1 and a full wake-up, both halves: SGLang's pages
// show neither),
// POST /update_weights_from_disk {"model_path", "weight_version"} (a load of --load-time, the
// engines paused), POST /pause_generation and /continue_generation, POST
// /update_weight_version {"new_version"}, and POST /generate; GET /model_info is in versions.go.
//
// Versions are decimal integers, which is what vllmstat reads as a policy version; the simulator
// refuses others.

func (s *Server) handleDriven(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /update_weight_version", s.handleSetVersion)
	if s.engine == fleetconfig.EngineSGLang {
		mux.HandleFunc("POST /generate", s.handleGenerate)
		mux.HandleFunc("POST /release_memory_occupation", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
			return okMessage("memory released"), sim.Sleep(s.idx, core.SleepLevel)
		}))
		mux.HandleFunc("POST /resume_memory_occupation", s.controlTimed(func(sim *fleetmodel.Sim, _ *http.Request, done func()) (any, error) {
			sim.WakeUp(s.idx, true, true, done)
			return okMessage("memory resumed"), nil
		}))
		mux.HandleFunc("POST /pause_generation", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
			sim.Pause(s.idx)
			return map[string]any{"message": "Generation paused successfully.", "status": "ok"}, nil
		}))
		mux.HandleFunc("POST /continue_generation", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
			sim.Resume(s.idx)
			return map[string]any{"message": "Generation continued successfully.", "status": "ok"}, nil
		}))
		mux.HandleFunc("POST /update_weights_from_disk", s.handleLoadFromDisk)
		return
	}
	if s.engine == fleetconfig.EngineTRTLLM {
		s.handleTRTLLMControl(mux)
		return
	}
	mux.HandleFunc("POST /sleep", s.control(func(sim *fleetmodel.Sim, r *http.Request) (any, error) {
		level := 1
		if q := r.URL.Query().Get("level"); q != "" {
			var err error
			if level, err = strconv.Atoi(q); err != nil {
				return nil, fmt.Errorf("sleep level %q is not a number", q)
			}
		}
		return nil, sim.Sleep(s.idx, level)
	}))
	mux.HandleFunc("POST /wake_up", s.controlTimed(func(sim *fleetmodel.Sim, r *http.Request, done func()) (any, error) {
		tags := r.URL.Query()["tags"]
		weights, kv := len(tags) == 0, len(tags) == 0
		for _, t := range tags {
			switch t {
			case "weights":
				weights = true
			case "kv_cache":
				kv = true
			default:
				return nil, fmt.Errorf("wake_up tag %q is not weights or kv_cache", t)
			}
		}
		sim.WakeUp(s.idx, weights, kv, done)
		return nil, nil
	}))
	mux.HandleFunc("GET /is_sleeping", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
		return map[string]bool{"is_sleeping": sim.Sleeping(s.idx)}, nil
	}))
	mux.HandleFunc("POST /pause", s.control(func(sim *fleetmodel.Sim, r *http.Request) (any, error) {
		switch mode := r.URL.Query().Get("mode"); mode {
		case "keep":
		case "", "abort", "wait":
			if sim.Busy(s.idx) {
				return nil, fmt.Errorf("pause mode %q with requests in flight is not simulated: use mode keep, or wait until they finish: %w", mode, fleetmodel.ErrBusy)
			}
		default:
			return nil, fmt.Errorf("pause mode %q is not abort, wait or keep", mode)
		}
		sim.Pause(s.idx)
		return map[string]string{"status": "paused"}, nil
	}))
	mux.HandleFunc("POST /resume", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
		sim.Resume(s.idx)
		return map[string]string{"status": "resumed"}, nil
	}))
	mux.HandleFunc("GET /is_paused", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
		return map[string]bool{"is_paused": sim.Paused(s.idx)}, nil
	}))
	mux.HandleFunc("POST /start_weight_update", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
		sim.StartWeightUpdate(s.idx)
		return map[string]string{"message": "Weight update started"}, nil
	}))
	mux.HandleFunc("POST /update_weights", s.controlTimed(func(sim *fleetmodel.Sim, _ *http.Request, done func()) (any, error) {
		return map[string]string{"message": "Weights updated"}, sim.UpdateWeights(s.idx, done)
	}))
	mux.HandleFunc("POST /finish_weight_update", s.withVersion("weight_version", func(sim *fleetmodel.Sim, v *int, done func()) (any, error) {
		return map[string]string{"message": "Weight update finished"}, sim.FinishWeightUpdate(s.idx, v, done)
	}))
}

func okMessage(msg string) map[string]any { return map[string]any{"success": true, "message": msg} }

// control makes a handler of fn, which runs on the Sim: its answer is fn's value as JSON (an
// empty 200 for nil), or its error, with 409 for engines busy or in the wrong state.
func (s *Server) control(fn func(sim *fleetmodel.Sim, r *http.Request) (any, error)) http.HandlerFunc {
	return s.controlTimed(func(sim *fleetmodel.Sim, r *http.Request, done func()) (any, error) {
		v, err := fn(sim, r)
		done()
		return v, err
	})
}

// controlTimed is control for a call that takes simulated time (a wake-up, a load): fn hands
// done to the Sim, which calls it once the call's effect is over and the pages show it, and the
// answer waits for it, as vLLM's endpoints answer when the wake-up or the load is done. A call
// fn refuses is answered at once, and done is then never called.
func (s *Server) controlTimed(fn func(sim *fleetmodel.Sim, r *http.Request, done func()) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var v any
		var ferr error
		over := make(chan struct{})
		if err := s.Drive(r.Context(), func(sim *fleetmodel.Sim) { v, ferr = fn(sim, r, func() { close(over) }) }); err != nil {
			s.writeError(w, openAIErrors, &apiError{status: http.StatusServiceUnavailable, msg: err.Error()})
			return
		}
		if ferr == nil {
			select {
			case <-over:
			case <-r.Context().Done():
				return
			case <-s.done:
				s.writeError(w, openAIErrors, &apiError{status: http.StatusServiceUnavailable, msg: ErrStopped.Error()})
				return
			}
		}
		switch {
		case errors.Is(ferr, fleetmodel.ErrBusy) || errors.Is(ferr, fleetmodel.ErrNoUpdate) || errors.Is(ferr, fleetmodel.ErrFinishing):
			s.writeError(w, openAIErrors, &apiError{status: http.StatusConflict, msg: ferr.Error()})
		case ferr != nil:
			s.writeError(w, openAIErrors, ferr)
		case v == nil:
			w.WriteHeader(http.StatusOK)
		default:
			writeJSON(w, http.StatusOK, v)
		}
	}
}

// withVersion makes a timed control handler of fn that reads a version from the body's key: a
// decimal integer (a JSON string or number), or nil when the key is absent or null.
func (s *Server) withVersion(key string, fn func(sim *fleetmodel.Sim, v *int, done func()) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := s.readVersion(r, key)
		if err != nil {
			s.writeError(w, openAIErrors, err)
			return
		}
		s.controlTimed(func(sim *fleetmodel.Sim, _ *http.Request, done func()) (any, error) { return fn(sim, v, done) })(w, r)
	}
}

// readVersion reads the version at key of the body: digits only, from 0 to maxVersion, which is
// what vllmstat reads back from the version endpoints (a larger one it would read as none).
func (s *Server) readVersion(r *http.Request, key string) (*int, error) {
	var body map[string]json.RawMessage
	if err := s.decodeBody(r, &body); err != nil {
		return nil, err
	}
	raw, ok := body[key]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var str string
	if json.Unmarshal(raw, &str) != nil {
		str = string(raw)
	} else if s.versionTag != "" {
		str = strings.TrimPrefix(str, s.versionTag) // "step-3", as the servers answer it
	}
	digits := str != "" && len(str) <= 16 && strings.Trim(str, "0123456789") == ""
	v, err := strconv.Atoi(str)
	if !digits || err != nil || v > MaxVersion {
		return nil, badRequest(key, nil, "%s %s is not a version from 0 to %d (2^53), the versions vllmstat reads", key, raw, int64(MaxVersion))
	}
	return &v, nil
}

func (s *Server) handleSetVersion(w http.ResponseWriter, r *http.Request) {
	v, err := s.readVersion(r, "new_version")
	switch {
	case err != nil:
		s.writeError(w, openAIErrors, err)
		return
	case v == nil:
		s.writeError(w, openAIErrors, badRequest("new_version", nil, "new_version is missing"))
		return
	}
	s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
		sim.SetWeightVersion(s.idx, *v)
		nv := strconv.Itoa(*v)
		if s.engine == fleetconfig.EngineSGLang {
			return map[string]any{"success": true, "message": "Weight version updated to " + nv, "new_version": nv}, nil
		}
		return map[string]any{"success": true, "new_version": nv}, nil
	})(w, r)
}

// handleLoadFromDisk is SGLang's weight load, answered when the load has ended.
func (s *Server) handleLoadFromDisk(w http.ResponseWriter, r *http.Request) {
	v, err := s.readVersion(r, "weight_version")
	if err != nil {
		s.writeError(w, openAIErrors, err)
		return
	}
	loaded := make(chan struct{})
	held := 0
	if err := s.Drive(r.Context(), func(sim *fleetmodel.Sim) { held = sim.LoadWeights(s.idx, v, func() { close(loaded) }) }); err != nil {
		s.writeError(w, openAIErrors, &apiError{status: http.StatusServiceUnavailable, msg: err.Error()})
		return
	}
	select {
	case <-loaded:
	case <-r.Context().Done():
		return
	case <-s.done:
		s.writeError(w, openAIErrors, &apiError{status: http.StatusServiceUnavailable, msg: ErrStopped.Error()})
		return
	}
	msg := "Succeeded to update model weights."
	if v != nil {
		msg += fmt.Sprintf(" Weight version updated to %d.", *v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": msg, "num_paused_requests": held})
}

// generateRequest is the part of SGLang's /generate request the simulator reads.
type generateRequest struct {
	Text           json.RawMessage `json:"text"`
	InputIDs       json.RawMessage `json:"input_ids"`
	SamplingParams struct {
		MaxNewTokens *int `json:"max_new_tokens"`
		N            *int `json:"n"`
		IgnoreEOS    bool `json:"ignore_eos"`
	} `json:"sampling_params"`
	Stream bool `json:"stream"`
}

// handleGenerate is SGLang's native generation: one result per sample (a list when there is more
// than one), each with its meta_info counts. Its errors are SGLang's /generate errors.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	var req generateRequest
	if err := s.decodeBody(r, &req); err != nil {
		s.writeError(w, generateErrors, err)
		return
	}
	raw, field := req.Text, "text"
	if len(raw) == 0 || string(raw) == "null" {
		raw, field = req.InputIDs, "input_ids"
	}
	if len(raw) == 0 || string(raw) == "null" {
		s.writeError(w, generateErrors, badRequest("text", nil, "text or input_ids is required"))
		return
	}
	in, err := readPrompt(raw, field)
	if err != nil {
		s.writeError(w, generateErrors, err)
		return
	}
	shape := requestShape{lens: in.lens(), n: 1, maxTokens: 128, maxParam: "max_new_tokens"} // SGLang's default max_new_tokens
	if p := req.SamplingParams.N; p != nil {
		shape.n = *p
	}
	if m := req.SamplingParams.MaxNewTokens; m != nil {
		shape.maxTokens, shape.given = *m, true
	}
	if err := s.Check(shape); err != nil {
		s.writeError(w, generateErrors, err)
		return
	}
	toks := in.tokens()
	prompts := make([]core.Prompt, len(toks))
	for i, t := range toks {
		prompts[i] = core.Prompt{Tokens: t, MaxTokens: shape.maxTokens, IgnoreEOS: req.SamplingParams.IgnoreEOS}
	}
	begin := s.clock.Now()
	results, err := s.generate(r.Context(), w, prompts, shape.n)
	if err != nil {
		if err != errClientLeft {
			s.writeError(w, generateErrors, err)
		}
		return
	}
	var out []map[string]any
	for _, samples := range results {
		for _, smp := range samples {
			reason := map[string]any{"type": smp.Reason}
			if smp.Reason == "length" {
				reason["length"] = smp.CompletionTokens
			}
			out = append(out, map[string]any{"text": fillerText(smp.CompletionTokens, len(out)), "meta_info": map[string]any{
				"id": strconv.FormatUint(completionIDs.Add(1), 16), "finish_reason": reason,
				"prompt_tokens": smp.PromptTokens, "completion_tokens": smp.CompletionTokens, "cached_tokens": smp.CachedTokens,
				"e2e_latency": s.clock.Now().Sub(begin).Seconds()}})
		}
	}
	var body any = out
	if len(out) == 1 {
		body = out[0]
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	for _, o := range out {
		b, _ := json.Marshal(o)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
