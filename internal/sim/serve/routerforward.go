package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// How the router forwards a generation request, as sgl-model-gateway's regular HTTP router
// does (src/routers/http/router.rs, route_typed_request): the request is counted, then up to
// routerAttempts times a worker is chosen by the policy, the request sent to the same path on
// it and its answer taken; an answer of a status is_retryable_status names (core/retry.rs: 408,
// 429, 500, 502, 503, 504) is tried again on the worker the policy chooses next, after an
// exponential backoff (RetryConfig's defaults in config/types.rs: max_retries 5 attempts in
// all, 50 ms times 1.5 per attempt, capped at 30 s, jitter of 20%). The last answer is relayed
// with its status, whatever it is; a worker that cannot be reached answers as
// convert_reqwest_error does, 500 with the router's error body.
//
// Simplified: the answer is read whole before it is relayed, a stream too (the simulated
// servers write a stream's chunks at its end anyway); only its Content-Type and Cache-Control
// headers are kept.
const (
	routerAttempts          = 5
	routerBackoffInitial    = 50 * time.Millisecond
	routerBackoffMultiplier = 1.5
	routerBackoffMax        = 30 * time.Second
	routerBackoffJitter     = 0.2
	// routerMaxPayload is the router's --max-payload-size default, 512 MiB.
	routerMaxPayload = 512 << 20
)

// retryable is the router's is_retryable_status.
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// errorType is the router's error_type label of a status (routers/grpc/utils.rs,
// error_type_from_status).
func errorType(status int) string {
	switch {
	case status == http.StatusBadRequest:
		return "validation_error"
	case status == http.StatusNotFound:
		return "no_workers"
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return "timeout"
	case status >= 500 && status <= 599:
		return "backend_error"
	}
	return "internal_error"
}

// endpointOf is the router's endpoint label of a route (route_to_endpoint).
func endpointOf(route string) string {
	switch route {
	case "/generate":
		return "generate"
	case "/v1/completions":
		return "completions"
	case "/v1/chat/completions":
		return "chat"
	}
	return "other"
}

// backoff is the router's wait before retry attempt+1 (BackoffCalculator::calculate_delay).
func backoff(attempt int) time.Duration {
	d := min(float64(routerBackoffInitial)*math.Pow(routerBackoffMultiplier, float64(attempt)), float64(routerBackoffMax))
	return time.Duration(d * (1 + routerBackoffJitter*(2*rand.Float64()-1)))
}

// routedRequest is what the router reads of a request to choose its worker and label its
// metrics (each request type's extract_text_for_routing, get_model and is_stream).
type routedRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	Text     json.RawMessage `json:"text"`
	Prompt   json.RawMessage `json:"prompt"`
	InputIDs json.RawMessage `json:"input_ids"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// routingText is the request's text the cache-aware policy matches: a generate request's text
// (or its input ids, space-separated), a completion's prompt, a chat's message texts, each list
// joined by spaces.
func (q routedRequest) routingText() string {
	for _, raw := range []json.RawMessage{q.Text, q.Prompt} {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			return one
		}
		var many []string
		if json.Unmarshal(raw, &many) == nil {
			return strings.Join(many, " ")
		}
	}
	if len(q.Messages) > 0 {
		var parts []string
		for _, m := range q.Messages {
			var s string
			if json.Unmarshal(m.Content, &s) == nil {
				parts = append(parts, s)
				continue
			}
			var ps []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(m.Content, &ps) == nil {
				for _, p := range ps {
					if p.Text != "" {
						parts = append(parts, p.Text)
					}
				}
			}
		}
		return strings.Join(parts, " ")
	}
	var ids []int64
	if json.Unmarshal(q.InputIDs, &ids) == nil {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.FormatInt(id, 10)
		}
		return strings.Join(s, " ")
	}
	return ""
}

// answer is a worker's answer, or the router's own.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// routerError is the router's error answer (routers/error.rs, create_error).
func routerError(status int, code, msg string) answer {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg,
		"type": strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_")), "code": code}})
	return answer{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: b}
}

// counted records every request to route in the router's HTTP metrics, as its middleware does.
func (r *Router) counted(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		start := r.clock.Now()
		h(w, req)
		r.metrics.HTTPRequest(req.Method, route, r.clock.Now().Sub(start))
	}
}

func (r *Router) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write(r.metrics.Page())
}

// routed is the handler of a generation route. The body is read as axum's Json extractor
// reads it: without a JSON content type it is a 415, a body that is not JSON a 400, one that is
// not an object a 422, each with the extractor's text; none of them reaches a worker.
func (r *Router) routed(route string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		// A rollout may take longer than the router's write timeout, which is for pages.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			http.Error(w, "Expected request with `Content-Type: application/json`", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, routerMaxPayload))
		if err != nil {
			http.Error(w, "Failed to buffer the request body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		var q routedRequest
		if err := json.Unmarshal(body, &q); err != nil {
			if _, ok := err.(*json.UnmarshalTypeError); ok {
				http.Error(w, "Failed to deserialize the JSON body into the target type: "+err.Error(), http.StatusUnprocessableEntity)
				return
			}
			http.Error(w, "Failed to parse the request body as JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		model := q.Model // a generate request names no model: the router's "unknown"
		if route == "/generate" || model == "" {
			model = "unknown"
		}
		a := r.forward(req.Context(), route, body, q.routingText(), model, q.Stream)
		if a.status == 0 {
			return // the client left
		}
		for _, k := range []string{"Content-Type", "Cache-Control"} {
			if v := a.header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(a.status)
		w.Write(a.body)
	}
}

// forward sends the request to the workers the policy chooses, retrying as the router does
// (see above), and returns the answer to relay: status 0 if the client left first.
func (r *Router) forward(ctx context.Context, route string, body []byte, text, model string, stream bool) answer {
	endpoint := endpointOf(route)
	start := r.clock.Now()
	r.metrics.RouterRequest(model, endpoint, stream)
	var a answer
	for attempt := 0; ; attempt++ {
		w := r.policy.choose(text)
		r.metrics.WorkerSelection(model, r.policy.name())
		a = r.send(ctx, http.MethodPost, r.workers[w]+route, body)
		r.policy.done(w)
		if ctx.Err() != nil {
			return answer{}
		}
		// The router records a stream's outcome as the stream ends, the others' at once: the
		// same here, where the answer is read whole.
		r.metrics.WorkerOutcome(r.workers[w], a.status >= 200 && a.status <= 299)
		if a.status >= 500 {
			r.metrics.WorkerError(errorType(a.status))
		}
		if !retryable(a.status) {
			break
		}
		if attempt+1 >= routerAttempts {
			r.metrics.RetriesExhausted(endpoint)
			break
		}
		r.metrics.Retry(endpoint)
		t := r.clock.NewTimer(backoff(attempt))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return answer{}
		}
	}
	switch {
	case a.status >= 200 && a.status <= 299:
		r.metrics.RouterDuration(model, endpoint, r.clock.Now().Sub(start))
	case !retryable(a.status):
		r.metrics.RouterError(model, endpoint, errorType(a.status))
	}
	return a
}

// send makes one request to a worker and reads its answer; a worker that cannot be reached, or
// whose answer breaks off, answers as the router's convert_reqwest_error does.
func (r *Router) send(ctx context.Context, method, url string, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return routerError(http.StatusInternalServerError, "call_upstream_builder_error", err.Error())
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.relay.Do(req)
	if err != nil {
		return routerError(http.StatusInternalServerError, "call_upstream_request_error", fmt.Sprintf("%v. URL: %s", err, url))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return routerError(http.StatusInternalServerError, "call_upstream_body_error", fmt.Sprintf("%v. URL: %s", err, url))
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// handleModels asks the first worker, as the router's proxy_get_request does for the requests
// it does not route by policy.
func (r *Router) handleModels(w http.ResponseWriter, req *http.Request) {
	a := r.send(req.Context(), http.MethodGet, r.workers[0]+"/v1/models", nil)
	if ct := a.header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(a.status)
	w.Write(a.body)
}
