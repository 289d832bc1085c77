package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

// The completion endpoints of a driven fleet's servers (workload none): OpenAI's POST
// /v1/completions and /v1/chat/completions as vLLM's and SGLang's servers answer them, and
// SGLang's POST /generate. Each request is simulated on one engine of the server it reaches
// (see Sim.Submit) and answered when its last sample finishes, with usage counts equal to what
// the page's counters gained from it: prompt_tokens counts the prompt once per sample, as the
// engines' prompt token counters do (vLLM's own usage counts it once per prompt). The text is
// filler, one word per token. Streaming answers (stream: true) send their chunks, one per token,
// once the request has finished, then data: [DONE].

// completionRequest is the part of OpenAI's completion and chat completion requests the
// simulator reads; vLLM's ignore_eos is read too.
type completionRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	N                   *int            `json:"n"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool `json:"ignore_eos"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// promptInput is a request's prompts as sent, not yet tokenized: texts, or lists of token ids.
type promptInput struct {
	texts []string
	ids   [][]int64
}

// readPrompt reads a prompt field: a string, a list of strings, a list of token ids or a list of
// such lists, each one prompt. An absent or null field is an error, as on vLLM and SGLang,
// whose prompt field is required.
func readPrompt(raw json.RawMessage, field string) (promptInput, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return promptInput{}, badRequest(field, nil, "%s is required", field)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return promptInput{texts: []string{one}}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) > 0 {
		return promptInput{texts: texts}, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return promptInput{ids: [][]int64{ids}}, nil
	}
	var lists [][]int64
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		return promptInput{ids: lists}, nil
	}
	return promptInput{}, badRequest(field, nil, "%s must be a string, a list of strings, a list of token ids or a list of such lists", field)
}

// lens are the prompts' lengths in tokens, counted without tokenizing them.
func (p promptInput) lens() []int {
	var out []int
	for _, t := range p.texts {
		out = append(out, countTokens(t))
	}
	for _, l := range p.ids {
		out = append(out, max(len(l), 1))
	}
	return out
}

// tokens tokenizes the prompts (see Tokenize and TokenIDs).
func (p promptInput) tokens() [][]uint64 {
	var out [][]uint64
	for _, t := range p.texts {
		out = append(out, core.Tokenize(t))
	}
	for _, l := range p.ids {
		out = append(out, core.TokenIDs(l))
	}
	return out
}

// chatText is the text the simulator tokenizes for a conversation: each message's role and its
// text, in order, so that conversations with the same beginning share a prefix.
func chatText(msgs []chatMessage) (string, error) {
	if len(msgs) == 0 {
		return "", errors.New("messages must not be empty")
	}
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString(": ")
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			b.WriteString(s)
		} else {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil && len(m.Content) > 0 && string(m.Content) != "null" {
				return "", fmt.Errorf("message content must be a string or a list of parts: %w", err)
			}
			for _, p := range parts {
				b.WriteString(p.Text)
				b.WriteString(" ")
			}
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// filler is the words the simulated model writes.
var filler = strings.Fields("the model writes these words in place of an answer so that a client can read some text back")

// fillerText is sample index's output of n tokens, one word each.
func fillerText(n, index int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(" ")
		b.WriteString(filler[(i+index)%len(filler)])
	}
	return b.String()
}

// completionIDs numbers the answers of all servers.
var completionIDs atomic.Uint64

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

func usageOf(results [][]fleetmodel.Sample) usage {
	var u usage
	for _, samples := range results {
		for _, s := range samples {
			u.PromptTokens += s.PromptTokens
			u.CompletionTokens += s.CompletionTokens
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// handleModels lists the served model, as the OpenAI servers do.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	owner := "vllm"
	if s.engine == fleetconfig.EngineSGLang {
		owner = "sglang"
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{{
		"id": s.model, "object": "model", "created": s.start.Unix(), "owned_by": owner, "root": s.model,
		"max_model_len": s.maxModelLen}}})
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) }

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) }

func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	var req completionRequest
	if err := s.decodeBody(r, &req); err != nil {
		s.writeError(w, openAIErrors, err)
		return
	}
	if req.Model != "" && req.Model != s.model {
		s.writeError(w, openAIErrors, &apiError{status: http.StatusNotFound, param: "model",
			msg: fmt.Sprintf("the model `%s` does not exist", req.Model)})
		return
	}
	var in promptInput
	if chat {
		text, err := chatText(req.Messages)
		if err != nil {
			s.writeError(w, openAIErrors, badRequest("messages", nil, "%v", err))
			return
		}
		in.texts = []string{text}
	} else {
		var err error
		if in, err = readPrompt(req.Prompt, "prompt"); err != nil {
			s.writeError(w, openAIErrors, err)
			return
		}
	}
	shape := requestShape{lens: in.lens(), n: 1, maxParam: "max_tokens"}
	if req.N != nil {
		shape.n = *req.N
	}
	if !chat {
		shape.maxTokens = 16 // OpenAI's default for completions, which vLLM keeps
	}
	for _, m := range []struct {
		v     *int
		param string
	}{{req.MaxTokens, "max_tokens"}, {req.MaxCompletionTokens, "max_completion_tokens"}} {
		if m.v != nil {
			shape.maxTokens, shape.given, shape.maxParam = *m.v, true, m.param
		}
	}
	if err := s.Check(shape); err != nil {
		s.writeError(w, openAIErrors, err)
		return
	}
	toks := in.tokens()
	prompts := make([]core.Prompt, len(toks))
	for i, t := range toks {
		prompts[i] = core.Prompt{Tokens: t, MaxTokens: shape.maxTokens, IgnoreEOS: req.IgnoreEOS}
	}
	results, err := s.generate(r.Context(), w, prompts, shape.n)
	if err != nil {
		if err != errClientLeft {
			s.writeError(w, openAIErrors, err)
		}
		return
	}
	id := strconv.FormatUint(completionIDs.Add(1), 16)
	c := completion{chat: chat, id: "cmpl-" + id, created: s.clock.Now().Unix(), model: s.model, results: results}
	if chat {
		c.id = "chatcmpl-" + id
	}
	if req.Stream {
		c.stream(w, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	writeJSON(w, http.StatusOK, c.body())
}

// decodeBody reads a JSON body into v; a body longer than the server takes (maxBody) is a 413.
func (s *Server) decodeBody(r *http.Request, v any) error {
	limit := MaxBody(s.maxModelLen)
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &apiError{status: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("the request body is larger than the %d bytes the simulator takes for a model length of %d", limit, s.maxModelLen)}
	}
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode request body: %w", err)
	}
	return nil
}

// errClientLeft is generate's error when the client left before the answer: nothing to write.
var errClientLeft = errors.New("the client left")

// generate runs n samples of each prompt on the server and waits for them. Its errors are
// apiErrors with the status to answer, or errClientLeft.
func (s *Server) generate(ctx context.Context, w http.ResponseWriter, prompts []core.Prompt, n int) ([][]fleetmodel.Sample, error) {
	// A rollout may take longer than the server's write timeout, which is for pages.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	out := make([][]fleetmodel.Sample, len(prompts))
	finished := make(chan struct{})
	var failed, refused error
	err := s.Drive(ctx, func(sim *fleetmodel.Sim) {
		for _, p := range prompts {
			if _, refused = p.Check(sim.Cfg.MaxModelLen); refused != nil {
				return
			}
		}
		left := len(prompts)
		for i, p := range prompts {
			// Checked above: Submit refuses nothing here. The replies run in the same goroutine.
			refused = sim.Submit(s.idx, p, n, func(samples []fleetmodel.Sample, err error) {
				out[i] = samples
				if err != nil {
					failed = err
				}
				if left--; left == 0 {
					close(finished)
				}
			})
		}
	})
	switch {
	case err != nil:
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: err.Error()}
	case refused != nil:
		return nil, badRequest("", nil, "%v", refused)
	}
	select {
	case <-finished:
	case <-ctx.Done():
		return nil, errClientLeft
	case <-s.done:
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: ErrStopped.Error()}
	}
	if failed != nil {
		return nil, &apiError{status: http.StatusInternalServerError, msg: failed.Error()}
	}
	return out, nil
}

// completion is one answer of the OpenAI endpoints.
type completion struct {
	chat    bool
	id      string
	created int64
	model   string
	results [][]fleetmodel.Sample // per prompt, per sample
}

func (c *completion) object() string {
	if c.chat {
		return "chat.completion"
	}
	return "text_completion"
}

// body is the answer without streaming; choices are numbered prompt by prompt, sample by
// sample, as vLLM numbers them.
func (c *completion) body() map[string]any {
	var choices []map[string]any
	for _, samples := range c.results {
		for _, smp := range samples {
			i := len(choices)
			text := fillerText(smp.CompletionTokens, i)
			ch := map[string]any{"index": i, "logprobs": nil, "finish_reason": smp.Reason, "stop_reason": nil}
			if c.chat {
				ch["message"] = map[string]any{"role": "assistant", "content": text, "tool_calls": []any{}}
			} else {
				ch["text"] = text
			}
			choices = append(choices, ch)
		}
	}
	return map[string]any{"id": c.id, "object": c.object(), "created": c.created, "model": c.model,
		"choices": choices, "usage": usageOf(c.results)}
}

// stream writes the answer as server-sent events: per choice, a chunk per token (after the
// role's chunk in a chat), the last one with the finish reason; then the usage chunk when asked
// for; then data: [DONE].
func (c *completion) stream(w http.ResponseWriter, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	object := c.object()
	if c.chat {
		object = "chat.completion.chunk"
	}
	chunk := func(choices []map[string]any, u *usage) {
		m := map[string]any{"id": c.id, "object": object, "created": c.created, "model": c.model, "choices": choices}
		if u != nil {
			m["usage"] = u
		}
		b, _ := json.Marshal(m)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	i := 0
	for _, samples := range c.results {
		for _, smp := range samples {
			if c.chat {
				chunk([]map[string]any{{"index": i, "delta": map[string]any{"role": "assistant", "content": ""},
					"logprobs": nil, "finish_reason": nil}}, nil)
			}
			for t := range smp.CompletionTokens {
				var reason any
				if t == smp.CompletionTokens-1 {
					reason = smp.Reason
				}
				text := " " + filler[(t+i)%len(filler)]
				ch := map[string]any{"index": i, "logprobs": nil, "finish_reason": reason, "stop_reason": nil}
				if c.chat {
					ch["delta"] = map[string]any{"content": text}
				} else {
					ch["text"] = text
				}
				chunk([]map[string]any{ch}, nil)
			}
			i++
		}
	}
	if includeUsage {
		u := usageOf(c.results)
		chunk([]map[string]any{}, &u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
