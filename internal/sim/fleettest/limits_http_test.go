package fleettest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/serve"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// errorBody is an error answer in any of the engines' shapes: vLLM's nested one, SGLang's flat
// OpenAI one, SGLang's /generate one.
type errorBody struct {
	Object  string `json:"object"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    int    `json:"code"`
	Error   *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   any    `json:"param"`
		Code    *int   `json:"code"`
	} `json:"error"`
}

// refusal is what a request out of bounds must get: its status, and the error's param and a
// piece of its message.
type refusal struct {
	name, path, body string
	code             int
	param            string // "" for a null param
	says             string
}

const maxInt64 = "9223372036854775807"

// TestDrivenRequestsOutOfBoundsAreRefused sends a vLLM server requests whose fields are out of
// the engines' bounds or the simulator's, each of which once killed the simulator (n of a
// billion: out of memory; max_tokens of 2^63-1 with ignore_eos: a panic) or was answered as if
// it were fine (a null prompt; max_tokens of 2^63-1; a version vllmstat cannot read back). Each
// must be a 400 (413 for a body too large) in vLLM's error shape, naming the field, and the
// server must answer a good request after them all.
func TestDrivenRequestsOutOfBoundsAreRefused(t *testing.T) {
	_, bases := drivenFleet(t, fleetconfig.EngineVLLM)
	base := bases[0]
	long := simtest.Words(4000, "w") // 4000 tokens of the 4096 of the model
	for _, tc := range []refusal{
		{"n of a billion", "/v1/completions", `{"prompt": "a", "n": 1000000000}`, 400, "n", "at most 16384"},
		{"n of 0", "/v1/completions", `{"prompt": "a", "n": 0}`, 400, "n", "at least 1"},
		{"n over vLLM's cap", "/v1/completions", `{"prompt": "a", "n": 16385}`, 400, "n", "VLLM_MAX_N_SEQUENCES"},
		{"n over the simulator's cap", "/v1/completions", `{"prompt": "a", "n": 1025, "max_tokens": 1}`, 400, "n", "at most 1024"},
		{"samples over the simulator's cap", "/v1/completions", `{"prompt": ["a", "b"], "n": 513, "max_tokens": 1}`, 400, "n", "1026 samples"},
		{"tokens over the simulator's cap", "/v1/completions", `{"prompt": "a", "n": 17, "max_tokens": 4000}`, 400, "", "68017 tokens"},
		{"max_tokens 2^63-1 with ignore_eos", "/v1/completions", `{"prompt": "a", "max_tokens": ` + maxInt64 + `, "ignore_eos": true}`, 400, "max_tokens", "max_model_len=4096"},
		{"max_tokens 2^63-1", "/v1/completions", `{"prompt": "a", "max_tokens": ` + maxInt64 + `}`, 400, "max_tokens", "max_model_len=4096"},
		{"max_tokens 0", "/v1/completions", `{"prompt": "a", "max_tokens": 0}`, 400, "max_tokens", "at least 1"},
		{"prompt and max_tokens over the model length", "/v1/completions", `{"prompt": "` + long + `", "max_tokens": 97}`, 400, "input_tokens", "4000 input tokens"},
		{"prompt of the model length", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + simtest.Words(4095, "w") + `"}]}`, 400, "input_tokens", "no room"},
		{"null prompt", "/v1/completions", `{"prompt": null}`, 400, "prompt", "prompt is required"},
		{"no prompt", "/v1/completions", `{"max_tokens": 3}`, 400, "prompt", "prompt is required"},
		{"empty prompt list", "/v1/completions", `{"prompt": []}`, 400, "prompt", "must be"},
		{"chat n of a billion", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "n": 1000000000}`, 400, "n", "at most 16384"},
		{"chat max_completion_tokens 2^63-1", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": ` + maxInt64 + `, "ignore_eos": true}`, 400, "max_completion_tokens", "max_model_len"},
		{"body too large", "/v1/completions", `{"prompt": "a", "padding": "` + strings.Repeat("x", int(serve.MaxBody(4096))) + `"}`, 413, "", "larger than"},
		{"version 2^53+1", "/update_weight_version", `{"new_version": 9007199254740993}`, 400, "new_version", "2^53"},
		{"version 2^53+1 as a string", "/update_weight_version", `{"new_version": "9007199254740993"}`, 400, "new_version", "2^53"},
		{"version of 2^64", "/update_weight_version", `{"new_version": "18446744073709551616"}`, 400, "new_version", "2^53"},
		{"signed version", "/update_weight_version", `{"new_version": "+5"}`, 400, "new_version", "2^53"},
		{"finished version 2^53+1", "/finish_weight_update", `{"weight_version": 9007199254740993}`, 400, "weight_version", "2^53"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRefusal(t, base, tc, vllmErrors) })
	}
	code, body := simtest.Post(t, base+"/v1/completions", `{"prompt": "`+long+`", "max_tokens": 96, "ignore_eos": true}`)
	if code != http.StatusOK || !strings.Contains(body, `"completion_tokens":96`) {
		t.Errorf("a request of the whole model length: %d %s", code, body)
	}
	if code, body := simtest.Post(t, base+"/update_weight_version", `{"new_version": 9007199254740992}`); code != http.StatusOK {
		t.Errorf("version 2^53: %d %s", code, body)
	}
	if got := simtest.MustGet(t, base+"/weight_info"); !strings.Contains(got, `"9007199254740992"`) {
		t.Errorf("/weight_info after version 2^53: %s", got)
	}
}

// TestDrivenSGLangRequestsOutOfBoundsAreRefused does the same on an SGLang server: /generate
// answers SGLang's {"error": {"message"}}, its OpenAI endpoints SGLang's flat error.
func TestDrivenSGLangRequestsOutOfBoundsAreRefused(t *testing.T) {
	_, bases := drivenFleet(t, fleetconfig.EngineSGLang)
	base := bases[0]
	for _, tc := range []refusal{
		{"n of a billion", "/generate", `{"text": "a", "sampling_params": {"n": 1000000000}}`, 400, "", "at most 16384"},
		{"n over the simulator's cap", "/generate", `{"input_ids": [[1], [2]], "sampling_params": {"n": 600, "max_new_tokens": 1}}`, 400, "", "1200 samples"},
		{"max_new_tokens 2^63-1 with ignore_eos", "/generate", `{"text": "a", "sampling_params": {"max_new_tokens": ` + maxInt64 + `, "ignore_eos": true}}`, 400, "", "maximum context length of 4096"},
		{"max_new_tokens reaching the context length", "/generate", `{"text": "a", "sampling_params": {"max_new_tokens": 4095}}`, 400, "", "maximum context length of 4096"},
		{"input of the context length", "/generate", `{"text": "` + simtest.Words(4096, "w") + `"}`, 400, "", "longer than the model's context length"},
		{"null text", "/generate", `{"text": null}`, 400, "", "text or input_ids is required"},
		{"no text", "/generate", `{"sampling_params": {"n": 2}}`, 400, "", "text or input_ids is required"},
		{"OpenAI n of a billion", "/v1/completions", `{"prompt": "a", "n": 1000000000}`, 400, "n", "at most 16384"},
		{"OpenAI null prompt", "/v1/completions", `{"prompt": null}`, 400, "prompt", "prompt is required"},
		{"version 2^53+1", "/update_weights_from_disk", `{"model_path": "m", "weight_version": "9007199254740993"}`, 400, "weight_version", "2^53"},
	} {
		shape := sglangErrors
		if tc.path == "/generate" {
			shape = generateErrorShape
		}
		t.Run(tc.name, func(t *testing.T) { checkRefusal(t, base, tc, shape) })
	}
	if code, body := simtest.Post(t, base+"/generate", `{"text": "a", "sampling_params": {"max_new_tokens": 4094, "n": 1}}`); code != http.StatusOK {
		t.Errorf("a request just inside the context length: %d %s", code, body)
	}
}

// TestMaxVersionIsWhatVllmstatReads keeps the simulator's largest version the one vllmstat reads
// back from a version endpoint.
func TestMaxVersionIsWhatVllmstatReads(t *testing.T) {
	if serve.MaxVersion != scrape.MaxVersion {
		t.Errorf("the simulator takes versions up to %d, vllmstat reads them up to %d", int64(serve.MaxVersion), scrape.MaxVersion)
	}
}

type errorShape uint8

const (
	vllmErrors errorShape = iota
	sglangErrors
	generateErrorShape
)

func checkRefusal(t *testing.T, base string, tc refusal, shape errorShape) {
	t.Helper()
	code, body := simtest.Post(t, base+tc.path, tc.body)
	if len(body) > 400 {
		body = body[:400] + "..."
	}
	if code != tc.code {
		t.Fatalf("%d %s, want %d", code, body, tc.code)
	}
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, body)
	}
	var msg string
	var param any
	switch shape {
	case vllmErrors:
		if e.Error == nil || e.Error.Code == nil || *e.Error.Code != tc.code || e.Error.Type != serve.ErrorType(tc.code) || e.Object != "" {
			t.Fatalf("not vLLM's error shape: %s", body)
		}
		msg, param = e.Error.Message, e.Error.Param
	case sglangErrors:
		if e.Object != "error" || e.Code != tc.code || e.Type != serve.ErrorType(tc.code) || e.Error != nil {
			t.Fatalf("not SGLang's OpenAI error shape: %s", body)
		}
		msg, param = e.Message, e.Param
	case generateErrorShape:
		if e.Error == nil || e.Error.Code != nil || e.Error.Type != "" || e.Object != "" {
			t.Fatalf("not SGLang's /generate error shape: %s", body)
		}
		msg, param = e.Error.Message, nil
	}
	want := any(nil)
	if tc.param != "" {
		want = tc.param
	}
	if param != want {
		t.Errorf("param %v, want %v: %s", param, want, body)
	}
	if !strings.Contains(msg, tc.says) {
		t.Errorf("message %q does not say %q", msg, tc.says)
	}
	if shape == vllmErrors && tc.param != "" && strings.Contains(msg, "(parameter=") &&
		!strings.Contains(msg, "(parameter="+tc.param+", value=") {
		t.Errorf("message %q names another parameter than %s", msg, tc.param)
	}
}
