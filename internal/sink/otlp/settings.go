package otlp

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/target"
)

// The protocols an otlp sink speaks, as OTEL_EXPORTER_OTLP_PROTOCOL spells them.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Settings are an otlp sink's settings, the keys of its entry under sinks. What a key leaves
// unset comes from the standard OTEL_EXPORTER_OTLP_* environment variables (the metrics
// signal's own first), as the OpenTelemetry specification defines them, and then from the
// specification's defaults; a key that is set wins over the environment.
type Settings struct {
	// Endpoint is the receiver's base URL (endpoint), such as http://collector:4318 (HTTP: each
	// signal's path, /v1/metrics or /v1/traces, goes after its own) or http://collector:4317
	// (gRPC). Default: the signal's OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT,
	// OTEL_EXPORTER_OTLP_ENDPOINT, then localhost on the protocol's port.
	Endpoint string `yaml:"endpoint"`
	// Protocol is http/protobuf or grpc (protocol). Default: OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
	// OTEL_EXPORTER_OTLP_PROTOCOL, then http/protobuf.
	Protocol string `yaml:"protocol"`
	// Headers are sent with every request (headers), instead of OTEL_EXPORTER_OTLP_HEADERS'.
	// Their values are never printed: they often carry a token.
	Headers headers `yaml:"headers"`
	// Timeout bounds one export (timeout). Default: OTEL_EXPORTER_OTLP_TIMEOUT, then 10s.
	Timeout time.Duration `yaml:"timeout"`
	// Compression is gzip or none (compression). Default: OTEL_EXPORTER_OTLP_COMPRESSION, then
	// none.
	Compression string `yaml:"compression"`
	// ResourceAttributes are added to the resource of every export (resource_attributes), e.g.
	// run: grpo-7b, after OTEL_RESOURCE_ATTRIBUTES'; service.name is vllmstat unless
	// OTEL_SERVICE_NAME or these say otherwise.
	ResourceAttributes map[string]string `yaml:"resource_attributes"`
	// Spans sends each step as a span, with a child span per run of each phase (spans), over
	// the same connection settings; default false, so that a collector without a traces
	// pipeline takes the metrics.
	Spans bool `yaml:"spans"`
	// MinBackoff and MaxBackoff bound the delay between the sink runtime's retries of a step
	// (min_backoff, max_backoff; defaults 500ms and 30s).
	MinBackoff time.Duration `yaml:"min_backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Settings are keys (a preset: summary, standard or all, the default), include and
	// exclude, which choose the step's metrics (see package keyset); the step number,
	// duration, workers and scrapes are always sent.
	keyset.Settings `yaml:",inline"`

	// env is the environment the unset keys come from (os.Getenv; a test's own).
	env func(string) string
}

func (Settings) UnknownKey() string { return "unknown setting of an otlp sink; known:" }

func (Settings) YAMLExample() string {
	return "{type: otlp, endpoint: http://collector:4318}"
}

// ParseSettings decodes and checks a sink entry strictly; its error is a config.Problems that
// names every problem with its key path. An entry may be bare ({type: otlp}): the environment
// then says where to send.
func ParseSettings(spec config.SinkSpec, getenv func(string) string) (Settings, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	s := Settings{MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second, env: getenv}
	var es yamlx.Errors
	at := yamlx.Where{}
	if spec.Settings != nil && spec.Settings.Kind == yaml.MappingNode {
		at, es = spec.Decode(&s)
	}
	es = append(es, s.validate(at)...)
	return s, spec.Problems(es)
}

// validate checks the values a decode alone does not, and the environment variables that the
// unset keys come from; at says where keys were given.
func (s *Settings) validate(at yamlx.Where) yamlx.Errors {
	es := s.Settings.Validate(at)
	if !at.Has("protocol") {
		s.Protocol = s.fromEnv("METRICS", "PROTOCOL")
	}
	switch p := s.Protocol; {
	case p == "":
		s.Protocol = ProtocolHTTP
	case p == ProtocolHTTP || p == ProtocolGRPC:
	case at.Has("protocol"):
		es = append(es, at.NotAllowed("protocol", p, "must be http/protobuf or grpc"))
	default:
		es = append(es, yamlx.Error{Msg: fmt.Sprintf("the environment's OTLP protocol %q is not one vllmstat speaks: set protocol to http/protobuf or grpc", p)})
	}
	if at.Has("endpoint") {
		if u, err := url.Parse(s.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			es = append(es, at.Problem("endpoint", fmt.Sprintf("%q is not allowed: must be an http or https URL with a host, e.g. http://collector:4318", target.Redact(s.Endpoint))))
		}
	}
	if at.Has("compression") && s.Compression != "gzip" && s.Compression != "none" {
		es = append(es, at.NotAllowed("compression", s.Compression, "must be gzip or none"))
	}
	es = append(es, sink.CheckDurations(at, s.Timeout, s.MinBackoff, s.MaxBackoff)...)
	for k, v := range s.ResourceAttributes {
		if k == "" || v == "" {
			es = append(es, at.Problem("resource_attributes", "names and values must be non-empty strings"))
			break
		}
	}
	return es
}

// fromEnv is a signal's (METRICS, TRACES) OTEL_EXPORTER_OTLP_<signal>_<name>, else
// OTEL_EXPORTER_OTLP_<name>.
func (s *Settings) fromEnv(signal, name string) string {
	if v := strings.TrimSpace(s.env("OTEL_EXPORTER_OTLP_" + signal + "_" + name)); v != "" {
		return v
	}
	return strings.TrimSpace(s.env("OTEL_EXPORTER_OTLP_" + name))
}

// headers are the headers of a sinks entry: an Authorization header is the usual way to give
// a collector's token.
type headers sink.Headers

func (h *headers) UnmarshalYAML(v *yaml.Node) error {
	m, err := sink.ParseHeaders(v, []string{"Content-Encoding", "Content-Length", "Content-Type", "Host", "User-Agent"}, "")
	if err != nil {
		return err
	}
	*h = headers(m)
	return nil
}
