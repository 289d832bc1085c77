// Package api serves vllmstat's HTTP API: trainers end steps and read them back, operators
// look at the live step and change the targets. Handlers return a value or an apiError and one
// wrapper writes JSON, so every error has the same shape: {"error": "<message>"}.
package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/decimal"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/version"
)

// MaxBody bounds request bodies; the largest legitimate one is a target list.
const MaxBody = 1 << 20

// Collector is what the API needs of the collector.
type Collector interface {
	EndStep(ctx context.Context, n int64) (step.Record, error)
	Live(ctx context.Context) (step.Record, []collector.TargetState, error)
	Steps(ctx context.Context, since int64) ([]step.Record, error)
	Targets(ctx context.Context) ([]string, error)
	SetTargets(ctx context.Context, ts []target.Target) error
	AddTargets(ctx context.Context, ts []target.Target) error
	RemoveTargets(ctx context.Context, urls []string) error
	StartPhase(ctx context.Context, name string) (collector.PhaseEdge, error)
	EndPhase(ctx context.Context, name string) (collector.PhaseEdge, error)
	Publish(ctx context.Context, v int64, name string) (collector.PolicyVersion, error)
}

// Options configure the handler.
type Options struct {
	Collector Collector
	// Token, when set, is required as a bearer token on everything that serves run data: /v1/,
	// the report at / and /metrics (unless MetricsPublic). /healthz stays open.
	Token string
	// MetricsPublic serves /metrics without the token, for a Prometheus that cannot send one.
	MetricsPublic bool
	// AnyHost answers requests that name the API by any host when there is no Token: an API
	// that listens on a network address without one (allow_insecure_listen), which anyone who
	// can reach it may call anyway. Otherwise, without a Token, a request must name the API as
	// localhost or a loopback address with the port it came in on (see guard).
	AnyHost bool
	// Targets is what PUT and POST /v1/targets refuse to add (see TargetPolicy).
	Targets TargetPolicy
	Metrics http.Handler // served at /metrics when set
	Report  http.Handler // served at / when set
	Logger  *slog.Logger
}

type apiError struct {
	code int
	msg  string
}

func errorf(code int, format string, a ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, a...)}
}

// New returns the API's handler.
func New(opt Options) http.Handler {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{opt: opt, checkTarget: opt.Targets.checker()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": version.Number()})
	})
	v1 := func(pattern string, f func(*http.Request) (any, *apiError)) {
		mux.Handle(pattern, h.auth(h.wrap(f)))
	}
	// Calls that change the run take JSON bodies only (see jsonBody).
	change := func(pattern string, f func(*http.Request) (any, *apiError)) {
		mux.Handle(pattern, h.auth(jsonBody(h.wrap(f))))
	}
	change("POST /v1/steps/end", h.endStep)
	change("POST /v1/phases/start", h.phase(h.opt.Collector.StartPhase))
	change("POST /v1/phases/end", h.phase(h.opt.Collector.EndPhase))
	change("POST /v1/policy", h.policy)
	v1("GET /v1/steps/{n}", h.getStep)
	v1("GET /v1/steps", h.listSteps)
	v1("GET /v1/live", h.live)
	v1("GET /v1/targets", h.targets)
	change("PUT /v1/targets", h.setTargets)
	change("POST /v1/targets", h.addTargets)
	change("DELETE /v1/targets", h.removeTargets)
	mux.Handle("/v1/", h.auth(h.wrap(func(r *http.Request) (any, *apiError) {
		switch p := r.URL.Path; {
		case p == "/v1/steps/end", p == "/v1/steps", p == "/v1/live", p == "/v1/targets", strings.HasPrefix(p, "/v1/steps/"),
			p == "/v1/phases/start", p == "/v1/phases/end", p == "/v1/policy":
			return nil, errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, p)
		}
		return nil, errorf(http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	})))
	if opt.Metrics != nil {
		if opt.MetricsPublic {
			mux.Handle("GET /metrics", opt.Metrics)
		} else {
			mux.Handle("GET /metrics", h.auth(opt.Metrics))
		}
	}
	if opt.Report != nil {
		mux.Handle("GET /{$}", h.auth(opt.Report))
	}
	return h.guard(mux)
}

type handler struct {
	opt         Options
	checkTarget func(url string) error // see TargetPolicy
}

// auth requires the bearer token. The scheme is matched without regard to case (RFC 9110) and
// the token compared in constant time, as hashes of equal length, so that a caller learns
// neither its bytes nor its length.
func (h *handler) auth(next http.Handler) http.Handler {
	if h.opt.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(h.opt.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearer(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vllmstat"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer reports that an Authorization header value is "Bearer <token>" with the token whose
// hash is want.
func bearer(header string, want [sha256.Size]byte) bool {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimLeft(tok, " ")))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func (h *handler) wrap(f func(*http.Request) (any, *apiError)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		v, err := f(r)
		if err != nil {
			if err.code >= 500 {
				h.opt.Logger.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err.msg)
			}
			writeJSON(w, err.code, map[string]string{"error": err.msg})
			return
		}
		if b, ok := v.([]byte); ok { // an already encoded step record
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// decode reads a JSON body strictly into v.
func decode(r *http.Request, v any) *apiError {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", MaxBody)
		}
		return errorf(http.StatusBadRequest, "read request body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if err == io.EOF {
			return errorf(http.StatusBadRequest, "empty request body: want a JSON object")
		}
		return errorf(http.StatusBadRequest, "malformed JSON body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "malformed JSON body: more than one value")
	}
	return nil
}

func collectorError(err error) *apiError {
	switch {
	case errors.Is(err, collector.ErrStepOrder), errors.Is(err, collector.ErrPolicyOrder), errors.Is(err, collector.ErrPolicyNameTaken):
		return errorf(http.StatusConflict, "%v", err)
	case errors.Is(err, collector.ErrStepRange), errors.Is(err, collector.ErrPhaseName), errors.Is(err, collector.ErrPolicyRange),
		errors.Is(err, collector.ErrPolicyName):
		return errorf(http.StatusBadRequest, "%v", err)
	case errors.Is(err, collector.ErrPhaseNotOpen):
		return errorf(http.StatusConflict, "%v", err)
	case errors.Is(err, collector.ErrStopped):
		return errorf(http.StatusServiceUnavailable, "vllmstat is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusServiceUnavailable, "request cancelled: %v", err)
	default:
		return errorf(http.StatusInternalServerError, "%v", err)
	}
}

func recordJSON(r *step.Record) (any, *apiError) {
	b, err := step.MarshalLine(r)
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "encode step: %v", err)
	}
	return b, nil
}

// traceParent is a call's W3C traceparent: the header an instrumented client sends, else the
// body's (given as inBody). The step's span is made a child of the trainer's span it names
// (see the otlp sink).
func traceParent(r *http.Request, inBody string) string {
	if tp := r.Header.Get("traceparent"); tp != "" {
		return tp
	}
	return inBody
}

func (h *handler) endStep(r *http.Request) (any, *apiError) {
	var body struct {
		Step *json.RawMessage `json:"step"`
		// TraceParent is the trainer's span as a W3C traceparent, for a client that cannot set
		// the traceparent header; the header wins.
		TraceParent string `json:"traceparent"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	if body.Step == nil {
		return nil, errorf(http.StatusBadRequest, `missing "step": want {"step": <number of the step that ends>}`)
	}
	// Read as text so that a number too large for int64 gets the same clear answer.
	n, err := strconv.ParseInt(string(*body.Step), 10, 64)
	if err != nil || n < 0 || n > collector.MaxStep {
		return nil, errorf(http.StatusBadRequest, `"step" must be a whole number from 0 to %d (2^53), got %s`, collector.MaxStep, *body.Step)
	}
	rec, cerr := h.opt.Collector.EndStep(collector.WithTraceParent(r.Context(), traceParent(r, body.TraceParent)), n)
	if cerr != nil {
		return nil, collectorError(cerr)
	}
	return recordJSON(&rec)
}

// phase handles a phase edge, {"phase": "<name>"}: it answers once the edge took effect, after a
// boundary scrape of every target.
func (h *handler) phase(edge func(context.Context, string) (collector.PhaseEdge, error)) func(*http.Request) (any, *apiError) {
	return func(r *http.Request) (any, *apiError) {
		var body struct {
			Phase       *string `json:"phase"`
			TraceParent string  `json:"traceparent"` // as a step end's
		}
		if err := decode(r, &body); err != nil {
			return nil, err
		}
		if body.Phase == nil {
			return nil, errorf(http.StatusBadRequest, `missing "phase": want {"phase": "rollout"}`)
		}
		e, err := edge(collector.WithTraceParent(r.Context(), traceParent(r, body.TraceParent)), *body.Phase)
		if err != nil {
			return nil, collectorError(err)
		}
		return e, nil
	}
}

// policy handles a publish of the trainer's weights, {"version": N, "name": "step-N"}: N must
// be greater than the last version published (409 otherwise); the optional name is the string
// the engines report once they load it, and must name no other version (409). It answers
// {"version", "name", "ts"} once the publish took effect, after a boundary scrape of every
// target.
func (h *handler) policy(r *http.Request) (any, *apiError) {
	var body struct {
		Version *json.RawMessage `json:"version"`
		Name    *json.RawMessage `json:"name"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	if body.Version == nil {
		return nil, errorf(http.StatusBadRequest, `missing "version": want {"version": <the version of the weights published>}`)
	}
	// Read as text, as a step number, so that a number too large for int64 gets the same answer.
	v, err := strconv.ParseInt(string(*body.Version), 10, 64)
	if err != nil || v < 0 || v > collector.MaxStep {
		return nil, errorf(http.StatusBadRequest, `"version" must be a whole number from 0 to %d (2^53), got %s`, collector.MaxStep, *body.Version)
	}
	var name string
	if body.Name != nil && string(*body.Name) != "null" {
		// The name is the trainer's and may be anything: the answer says what is wrong with
		// it, not what it is.
		if json.Unmarshal(*body.Name, &name) != nil {
			return nil, errorf(http.StatusBadRequest, `"name" must be a string, such as "step-%d"`, v)
		}
		if why := scrape.VersionTagProblem(name); why != "" {
			return nil, errorf(http.StatusBadRequest, `"name" must be 1 to %d bytes of printable UTF-8: it is %s`, scrape.MaxVersionTag, why)
		}
		if n, ok := scrape.ParseDecimalVersion(name); ok && n != v {
			return nil, errorf(http.StatusBadRequest, `"name" is the number %d, which engines report as version %d, not %d`, n, n, v)
		}
	}
	pv, cerr := h.opt.Collector.Publish(r.Context(), v, name)
	if cerr != nil {
		return nil, collectorError(cerr)
	}
	return pv, nil
}

func (h *handler) getStep(r *http.Request) (any, *apiError) {
	n, err := decimal.ParseInt(r.PathValue("n"), 64)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "step %q is not allowed: %v", r.PathValue("n"), err)
	}
	recs, cerr := h.opt.Collector.Steps(r.Context(), n)
	if cerr != nil {
		return nil, collectorError(cerr)
	}
	for i := range recs {
		if recs[i].Step == n {
			return recordJSON(&recs[i])
		}
	}
	return nil, errorf(http.StatusNotFound, "step %d is unknown (not closed, or no longer kept in memory: see steps.jsonl)", n)
}

func (h *handler) listSteps(r *http.Request) (any, *apiError) {
	var since int64
	if s := r.URL.Query().Get("since"); s != "" {
		var err error
		if since, err = decimal.ParseInt(s, 64); err != nil {
			return nil, errorf(http.StatusBadRequest, "since=%q is not allowed: %v", s, err)
		}
	}
	recs, err := h.opt.Collector.Steps(r.Context(), since)
	if err != nil {
		return nil, collectorError(err)
	}
	if recs == nil {
		recs = []step.Record{}
	}
	return map[string]any{"steps": recs}, nil
}

func (h *handler) live(r *http.Request) (any, *apiError) {
	rec, ts, err := h.opt.Collector.Live(r.Context())
	if err != nil {
		return nil, collectorError(err)
	}
	if ts == nil {
		ts = []collector.TargetState{}
	}
	return map[string]any{"step": rec, "targets": ts}, nil
}

func (h *handler) targets(r *http.Request) (any, *apiError) {
	ts, err := h.opt.Collector.Targets(r.Context())
	if err != nil {
		return nil, collectorError(err)
	}
	if ts == nil {
		ts = []string{}
	}
	return map[string]any{"targets": ts}, nil
}

// setTargets takes http and https URLs only (no host:port shorthand), schemes in any case.
// User info in a URL becomes the target's basic-auth credentials; URLs are returned without it.
func (h *handler) setTargets(r *http.Request) (any, *apiError) {
	ts, urls, aerr := readTargets(r, h.checkTarget)
	if aerr != nil {
		return nil, aerr
	}
	if err := h.opt.Collector.SetTargets(r.Context(), ts); err != nil {
		return nil, collectorError(err)
	}
	return map[string]any{"targets": urls}, nil
}

// addTargets adds the listed targets to the static ones (POST): a target already there stays
// as it is, so workers may each register their own URL at the same time. It answers with every
// target now scraped.
func (h *handler) addTargets(r *http.Request) (any, *apiError) {
	ts, _, aerr := readTargets(r, h.checkTarget)
	if aerr != nil {
		return nil, aerr
	}
	if err := h.opt.Collector.AddTargets(r.Context(), ts); err != nil {
		return nil, collectorError(err)
	}
	return h.targets(r)
}

// removeTargets removes the listed targets (DELETE); URLs that are not targets are ignored. It
// answers with every target now scraped.
func (h *handler) removeTargets(r *http.Request) (any, *apiError) {
	_, urls, aerr := readTargets(r, nil)
	if aerr != nil {
		return nil, aerr
	}
	if err := h.opt.Collector.RemoveTargets(r.Context(), urls); err != nil {
		return nil, collectorError(err)
	}
	return h.targets(r)
}

// readTargets reads {"targets": [URL, ...]}: http and https URLs only (no host:port
// shorthand), schemes in any case, user info moved into the target's credentials. With a
// check, the targets it refuses are 400 (see TargetPolicy).
func readTargets(r *http.Request, check func(url string) error) ([]target.Target, []string, *apiError) {
	var body struct {
		Targets []string `json:"targets"`
	}
	if err := decode(r, &body); err != nil {
		return nil, nil, err
	}
	if body.Targets == nil {
		return nil, nil, errorf(http.StatusBadRequest, `missing "targets": want {"targets": ["http://host:8000/metrics", ...]}`)
	}
	var problems []string
	first := map[string][2]int{} // URL -> its first entry's index in ts and in the body
	ts := make([]target.Target, 0, len(body.Targets))
	urls := make([]string, 0, len(body.Targets))
	for i, raw := range body.Targets {
		scheme, _, ok := strings.Cut(strings.TrimSpace(raw), "://")
		if !ok || !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
			problems = append(problems, fmt.Sprintf("targets[%d]: %q: only http and https URLs", i, target.Redact(raw)))
			continue
		}
		t, err := target.Parse(raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("targets[%d]: %q: %v", i, target.Redact(raw), err))
			continue
		}
		if check != nil {
			if err := check(t.URL); err != nil {
				problems = append(problems, fmt.Sprintf("targets[%d]: %q: %v", i, t.URL, err))
				continue
			}
		}
		if j, dup := first[t.URL]; dup {
			if !ts[j[0]].Auth.Equal(t.Auth) {
				problems = append(problems, fmt.Sprintf("targets[%d]: %q is targets[%d] with other credentials; a URL is one target with one set of credentials", i, t.URL, j[1]))
			}
			continue
		}
		first[t.URL] = [2]int{len(ts), i}
		ts = append(ts, t)
		urls = append(urls, t.URL)
	}
	if len(problems) > 0 {
		return nil, nil, errorf(http.StatusBadRequest, "%s", strings.Join(problems, "; "))
	}
	return ts, urls, nil
}
