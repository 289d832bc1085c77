package otlp

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/sink/otlp/otlptest"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// demoRecords are the steps.jsonl records of a vLLM demo run with every option that adds keys.
func demoRecords(t *testing.T) []*step.Record {
	rs, err := report.ReadSteps(filepath.Join("..", "..", "keyset", "testdata", "vllm.jsonl"))
	if err != nil || len(rs) == 0 {
		t.Fatalf("%d records: %v", len(rs), err)
	}
	return rs
}

// newSink is the sink of an entry (yml) in an environment (env).
func newSink(t *testing.T, yml string, env map[string]string) *Sink {
	t.Helper()
	s, err := New(parse(t, yml, env), vllm.Prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parse(t *testing.T, yml string, env map[string]string) Settings {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(yml), &n); err != nil {
		t.Fatal(err)
	}
	set, err := ParseSettings(config.SinkSpec{Type: "otlp", Path: "sinks[0]", Settings: n.Content[0]}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestExportsEveryKeyOfTheSteps(t *testing.T) {
	for _, tc := range []struct{ name, protocol, compression string }{
		{"http", ProtocolHTTP, "none"}, {"http gzip", ProtocolHTTP, "gzip"}, {"grpc", ProtocolGRPC, "none"}, {"grpc gzip", ProtocolGRPC, "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := otlptest.StartHTTP(t)
			if tc.protocol == ProtocolGRPC {
				rc = otlptest.StartGRPC(t)
			}
			s := newSink(t, fmt.Sprintf("{endpoint: %q, protocol: %s, compression: %s, headers: {Authorization: Bearer s3cret}, resource_attributes: {run: grpo-7b}}", rc.URL, tc.protocol, tc.compression), nil)
			recs := demoRecords(t)
			for _, r := range recs {
				if err := s.Write(t.Context(), r); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			reqs, hdrs := rc.Got()
			if len(reqs) != len(recs) {
				t.Fatalf("%d requests for %d steps", len(reqs), len(recs))
			}
			for i, h := range hdrs {
				if h["authorization"] != "Bearer s3cret" {
					t.Errorf("request %d: authorization %q", i, h["authorization"])
				}
				enc := h["content-encoding"]
				if tc.protocol == ProtocolGRPC {
					enc = rc.Encodings[i]
				}
				if (tc.compression == "gzip") != (enc == "gzip") {
					t.Errorf("request %d: encoding %q with compression %s", i, enc, tc.compression)
				}
			}
			for i, r := range recs {
				res := otlptest.AttrString(reqs[i].ResourceMetrics[0].Resource.Attributes)
				if !strings.Contains(res, "run=grpo-7b") || !strings.Contains(res, "service.name=vllmstat") {
					t.Errorf("resource %s", res)
				}
				got := map[string]float64{}
				for _, p := range otlptest.Points(t, Scope, reqs[i:i+1]) {
					if !p.T.Equal(r.End) {
						t.Fatalf("%s at %s, want the step's end %s", p.Name, p.T, r.End)
					}
					got[p.Key()] = p.V
				}
				for k, v := range otlptest.Want(r) {
					g, ok := got[k]
					if !ok || !(g == v || math.IsNaN(g) && math.IsNaN(v)) {
						t.Errorf("step %d: %s = %v (sent: %v), want %v", r.Step, k, g, ok, v)
					}
				}
				if len(got) < len(otlptest.Want(r)) {
					t.Errorf("step %d: %d points, want at least %d", r.Step, len(got), len(otlptest.Want(r)))
				}
			}
		})
	}
}

// A failed export is the runtime's to retry: Write returns it, and the same record written
// again is sent whole.
func TestFailedExportReturnsAndRetries(t *testing.T) {
	rc := otlptest.StartHTTP(t)
	rc.Fail = 1
	s := newSink(t, fmt.Sprintf("{endpoint: %q, timeout: 5s}", rc.URL), nil)
	defer s.Close(context.Background())
	r := demoRecords(t)[0]
	if err := s.Write(t.Context(), r); err == nil || !strings.Contains(err.Error(), "step 1") {
		t.Fatalf("a 503 gave %v, want an error naming the step", err)
	}
	if err := s.Write(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := rc.Got(); len(reqs) != 1 || len(otlptest.Points(t, Scope, reqs)) < len(otlptest.Want(r)) {
		t.Fatalf("%d requests after the retry", len(reqs))
	}
}

// The OTEL_EXPORTER_OTLP_* variables say where and how when the entry does not; its keys win.
func TestEnvironmentAndItsOverrides(t *testing.T) {
	rc := otlptest.StartGRPC(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20from-env")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,run=from-env")
	env := map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	s := newSink(t, "{resource_attributes: {run: from-config}}", env)
	r := demoRecords(t)[0]
	if err := s.Write(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	s.Close(t.Context())
	reqs, hdrs := rc.Got()
	if len(reqs) != 1 || hdrs[0]["authorization"] != "Bearer from-env" {
		t.Fatalf("%d requests, headers %v", len(reqs), hdrs)
	}
	res := otlptest.AttrString(reqs[0].ResourceMetrics[0].Resource.Attributes)
	if !strings.Contains(res, "deployment.environment=test") || !strings.Contains(res, "run=from-config") {
		t.Errorf("resource %s: want the environment's attributes, run from the config", res)
	}

	// The entry's endpoint and protocol win over the environment's (a gRPC port there).
	hr := otlptest.StartHTTP(t)
	s = newSink(t, fmt.Sprintf("{endpoint: %q, protocol: http/protobuf, headers: {Authorization: Bearer from-config}}", hr.URL), env)
	if err := s.Write(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	s.Close(t.Context())
	if reqs, hdrs := hr.Got(); len(reqs) != 1 || hdrs[0]["authorization"] != "Bearer from-config" {
		t.Fatalf("%d requests, headers %v", len(reqs), hdrs)
	}
}

func TestSettingsProblems(t *testing.T) {
	for _, tc := range []struct {
		yml  string
		env  map[string]string
		want string
	}{
		{"{protocol: http/json}", nil, "sinks[0].protocol (line 1): \"http/json\" is not allowed: must be http/protobuf or grpc"},
		{"{}", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"}, "the environment's OTLP protocol \"http/json\""},
		{"{endpoint: \"http://user:hunter2@collector:4318\", compression: zstd}", nil, "compression (line 1): \"zstd\" is not allowed"},
		{"{endpoint: \"collector:4318\"}", nil, "must be an http or https URL"},
		{"{endpoint: \"http://user:hunter2@collector:43x8\"}", nil, "must be an http or https URL"},
		{"{timeout: 0s}", nil, "timeout"},
		{"{headers: {Content-Type: text/plain}}", nil, "the sink sets it"},
		{"{keys: everything}", nil, "must be one of summary, standard, all"},
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(tc.yml), &n); err != nil {
			t.Fatal(err)
		}
		_, err := ParseSettings(config.SinkSpec{Type: "otlp", Path: "sinks[0]", Settings: n.Content[0]}, func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yml, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", tc.yml, err)
		}
	}
}
