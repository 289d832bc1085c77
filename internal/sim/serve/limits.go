package serve

import (
	"errors"
	"fmt"
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

// maxRequestSamples bounds a request's samples, n times its prompts. A sample costs about a
// kilobyte while the request is in flight (its engine request, its answer); vLLM itself takes up
// to maxN per prompt, which RL trainers stay far below (a GRPO group is 4 to 64 samples).
const maxRequestSamples = 1024

// requestModelLens bounds a request's tokens, each sample's prompt plus max_tokens summed over
// its samples, in model lengths: a group of 16 samples of the whole model length fits, or more
// samples of shorter ones.
const requestModelLens = 16

// bodyBytesPerToken is the room a request's body has per token it may ask for: a token id and
// its separator, or a word of text and its space.
const bodyBytesPerToken = 16

// maxBody bounds the body of a request to servers of model length maxModelLen: the tokens it
// may ask for, and room for the rest of the request.
func MaxBody(maxModelLen int) int64 {
	return 64<<10 + bodyBytesPerToken*requestModelLens*int64(maxModelLen)
}

// maxVersion is the largest weight version the control endpoints take: 2^53, the largest that
// vllmstat reads back as a version (scrape.MaxVersion, collector.MaxStep).
const MaxVersion = 1 << 53

// apiError is a refused request: its HTTP status, the request field at fault (vLLM's param) and
// the value refused, when there is one.
type apiError struct {
	status       int
	param, value string
	msg          string
}

func (e *apiError) Error() string { return e.msg }

// badRequest is a 400 for the request field param ("" when no one field is at fault).
func badRequest(param string, value any, format string, args ...any) *apiError {
	e := &apiError{status: http.StatusBadRequest, param: param, msg: fmt.Sprintf(format, args...)}
	if value != nil {
		e.value = fmt.Sprint(value)
	}
	return e
}

// errorAPI is the API whose error shape an answer takes.
type errorAPI uint8

const (
	openAIErrors   errorAPI = iota // the server's OpenAI endpoints and its control calls
	generateErrors                 // SGLang's /generate
)

// writeError answers err in the shape of the server's API: vLLM's OpenAI server nests it,
// {"error": {"message", "type", "param", "code"}}, the message ending in "(parameter=...,
// value=...)" as VLLMValidationError's does; SGLang's OpenAI server lays it flat, {"object":
// "error", "message", "type", "param", "code"}; SGLang's /generate answers {"error":
// {"message"}}. Errors that are not apiErrors are 400s.
func (s *Server) writeError(w http.ResponseWriter, api errorAPI, err error) {
	e, ok := errors.AsType[*apiError](err)
	if !ok {
		e = &apiError{status: http.StatusBadRequest, msg: err.Error()}
	}
	var param any
	if e.param != "" {
		param = e.param
	}
	switch {
	case api == generateErrors:
		writeJSON(w, e.status, map[string]any{"error": map[string]any{"message": e.msg}})
	case s.engine == fleetconfig.EngineSGLang:
		writeJSON(w, e.status, map[string]any{"object": "error", "message": e.msg, "type": ErrorType(e.status),
			"param": param, "code": e.status})
	default:
		msg := e.msg
		if e.param != "" && e.value != "" {
			msg += " (parameter=" + e.param + ", value=" + e.value + ")"
		}
		writeJSON(w, e.status, map[string]any{"error": map[string]any{"message": msg, "type": ErrorType(e.status),
			"param": param, "code": e.status}})
	}
}

// errorType is the engines' name of an error status (vLLM's create_error_response).
func ErrorType(status int) string {
	switch {
	case status == http.StatusNotFound:
		return "NotFoundError"
	case status >= 500:
		return "InternalServerError"
	}
	return "BadRequestError"
}

// requestShape is what a completion request asks for, read but not yet tokenized: each prompt's
// length in tokens, the samples per prompt, and max_tokens as the field maxParam gave it (given),
// or a default: 0 for the rest of the model length.
type requestShape struct {
	lens      []int
	n         int
	maxTokens int
	given     bool
	maxParam  string
}

// check returns what is wrong with the request for the server's engines, nil if nothing.
func (s *Server) Check(r requestShape) error {
	mml := s.maxModelLen
	switch {
	case r.n < 1:
		return badRequest("n", nil, "n must be at least 1, got %d", r.n)
	case r.n > fleetmodel.MaxN:
		return badRequest("n", nil, "n must be at most %d (vLLM's VLLM_MAX_N_SEQUENCES), got %d", fleetmodel.MaxN, r.n)
	case r.given && r.maxTokens < 1:
		return badRequest(r.maxParam, r.maxTokens, "%s must be at least 1, got %d", r.maxParam, r.maxTokens)
	case s.engine != fleetconfig.EngineSGLang && r.maxTokens > mml:
		return badRequest(r.maxParam, r.maxTokens, "%s=%d is more than max_model_len=%d: ask for fewer output tokens",
			r.maxParam, r.maxTokens, mml)
	case len(r.lens)*r.n > maxRequestSamples:
		return badRequest("n", nil, "the request asks for %d samples (%d prompts, n=%d): the simulator takes at most %d per request",
			len(r.lens)*r.n, len(r.lens), r.n, maxRequestSamples)
	}
	total := 0
	for _, l := range r.lens {
		if err := s.checkContext(l, r.maxTokens, r.maxParam); err != nil {
			return err
		}
		if r.maxTokens == 0 {
			total += r.n * mml // the prompt and the rest of the model length
		} else {
			total += r.n * (l + r.maxTokens)
		}
	}
	if limit := requestModelLens * mml; total > limit {
		return badRequest("", nil, "the request asks for %d tokens (prompt and %s of each of its samples): the simulator takes "+
			"at most %d per request, %d times the model length", total, r.maxParam, limit, requestModelLens)
	}
	return nil
}

// checkContext checks that a prompt of l tokens and maxTokens (0: the rest) fit the model length,
// as the server's engine checks it.
func (s *Server) checkContext(l, maxTokens int, maxParam string) error {
	mml := s.maxModelLen
	if s.engine == fleetconfig.EngineSGLang {
		switch {
		case l >= mml:
			return badRequest("", nil, "the input (%d tokens) is longer than the model's context length (%d tokens)", l, mml)
		case maxTokens >= mml-l:
			return badRequest("", nil, "requested token count exceeds the model's maximum context length of %d tokens: "+
				"%d tokens of input and %d for the completion", mml, l, maxTokens)
		}
		return nil
	}
	switch {
	case maxTokens == 0 && l >= mml:
		return badRequest("input_tokens", l, "this model's maximum context length is %d tokens, and the prompt has %d, "+
			"which leaves no room for output", mml, l)
	case maxTokens > mml-l: // not l+maxTokens, which can overflow
		return badRequest("input_tokens", l, "this model's maximum context length is %d tokens: %d input tokens and "+
			"%s %d do not fit", mml, l, maxParam, maxTokens)
	}
	return nil
}

// countTokens is the number of tokens Tokenize makes of text, without making them.
func countTokens(text string) int {
	n, in := 0, false
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return max(n, 1)
}
