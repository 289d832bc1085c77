// Package otlp is the otlp sink: it sends every closed step to an OpenTelemetry receiver (an
// OpenTelemetry Collector, or a store that takes OTLP) as OTLP metrics, over HTTP/protobuf or
// gRPC, through OpenTelemetry's own exporters.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/version"
)

// Type is the otlp sink's entry in the sink registry.
var Type = sink.NewType(
	func(_ sink.Env, spec config.SinkSpec) (Settings, error) { return ParseSettings(spec, nil) },
	func(e sink.Env, set Settings) (sink.Sink, error) { return New(set, e.MetricPrefix, e.Logger) },
	sink.Caps{})

var (
	_ sink.Sink      = (*Sink)(nil)
	_ sink.Backoffer = (*Sink)(nil)
)

// exporter is what both OTLP metric exporters do.
type exporter interface {
	Export(ctx context.Context, rm *metricdata.ResourceMetrics) error
	Shutdown(ctx context.Context) error
}

// Sink exports each closed step as one OTLP export request. A failed export is returned to the
// sink runtime, which retries the step with the sink's backoff (the exporters' own retries are
// off, so that one policy holds for every sink); the runtime's queue holds the steps waiting
// meanwhile, and steps.jsonl holds every step whatever the receiver does.
type Sink struct {
	set     Settings
	prefix  string
	keys    *keyset.Set
	exp     exporter
	metrics *metrics
	spanExp sdktrace.SpanExporter // nil without spans
	spans   *spans

	// sent is the step whose metrics were accepted while its spans were not: its retry sends
	// the spans only. Write's caller owns it.
	sent struct {
		ok   bool
		step int64
		end  time.Time
	}
}

// New makes the sink's exporter (no connection is made before the first export).
func New(set Settings, prefix string, log *slog.Logger) (*Sink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	where := target.Redact(set.Endpoint)
	if where == "" {
		where = "from the environment"
	}
	log = log.With("sink", "otlp", "protocol", set.Protocol, "endpoint", where)
	// What the exporters report beside their errors (a receiver's partial success, say) goes to
	// the run's log; it is the process's one handler.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry", "err", err) }))
	ctx := context.Background()
	res, err := newResource(ctx, set.ResourceAttributes)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: resource attributes: %w", err)
	}
	exp, err := newMetricExporter(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	var sexp sdktrace.SpanExporter
	if set.Spans {
		if sexp, err = newSpanExporter(ctx, set); err != nil {
			return nil, fmt.Errorf("otlp sink: %w", err)
		}
	}
	sk := &Sink{set: set, prefix: prefix, keys: set.Settings.Compile(prefix), exp: exp, spanExp: sexp,
		metrics: newMetrics(prefix, res, version.Number())}
	if sexp != nil {
		sk.spans = newSpans(prefix, res, version.Number())
	}
	return sk, nil
}

// newResource is service.name=vllmstat, then OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES,
// then the sink's resource_attributes, each overriding the ones before.
func newResource(ctx context.Context, attrs map[string]string) (*resource.Resource, error) {
	env, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", "vllmstat")), env)
	if err != nil {
		return nil, err
	}
	var kv []attribute.KeyValue
	for k, v := range attrs {
		kv = append(kv, attribute.String(k, v))
	}
	return resource.Merge(res, resource.NewSchemaless(kv...))
}

// conn is what both signals' exporters take from the settings; the exporters read the
// OTEL_EXPORTER_OTLP_* variables themselves, and what conn sets, given as options, overrides
// them.
type conn struct {
	url      string // "" for the environment's
	headers  map[string]string
	timeout  time.Duration
	compress string // gzip, none, or "" for the environment's
	envZip   bool   // the environment names a compression
}

// signalURL is the endpoint's URL for a signal over HTTP: the endpoint is the receiver's base,
// as OTEL_EXPORTER_OTLP_ENDPOINT is, and each signal's path goes after its own.
func signalURL(endpoint, signal string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/" + signal
	return u.String()
}

func (s Settings) conn(signal string) conn {
	c := conn{headers: s.Headers, timeout: s.Timeout, compress: s.Compression, envZip: s.fromEnv(strings.ToUpper(signal), "COMPRESSION") != ""}
	if s.Endpoint != "" {
		c.url = s.Endpoint
		if s.Protocol == ProtocolHTTP {
			c.url = signalURL(s.Endpoint, signal)
		}
	}
	return c
}

// optionSet is one exporter package's option constructors, which each package declares anew
// for its own Option type.
type optionSet[O any] struct {
	url      func(string) O
	headers  func(map[string]string) O
	timeout  func(time.Duration) O
	compress func(string) O // gzip or none
	noRetry  O
}

// options are conn's settings as options of one exporter package: what conn leaves unset is
// given no option, so that the exporter reads it from the environment.
func options[O any](c conn, o optionSet[O]) []O {
	opts := []O{o.noRetry}
	if c.url != "" {
		opts = append(opts, o.url(c.url))
	}
	if c.headers != nil {
		opts = append(opts, o.headers(c.headers))
	}
	if c.timeout > 0 {
		opts = append(opts, o.timeout(c.timeout))
	}
	if c.compress != "" {
		opts = append(opts, o.compress(c.compress))
	}
	return opts
}

// httpCompression is a compression setting as the HTTP exporters' constant.
func httpCompression[C ~int](gzip, none C) func(string) C {
	return func(z string) C {
		if z == "gzip" {
			return gzip
		}
		return none
	}
}

// newMetricExporter makes the metrics exporter of set's protocol.
func newMetricExporter(ctx context.Context, set Settings) (exporter, error) {
	c := set.conn("metrics")
	if set.Protocol == ProtocolGRPC {
		c.compress = c.grpcCompressor()
		return otlpmetricgrpc.New(ctx, options(c, optionSet[otlpmetricgrpc.Option]{otlpmetricgrpc.WithEndpointURL, otlpmetricgrpc.WithHeaders,
			otlpmetricgrpc.WithTimeout, otlpmetricgrpc.WithCompressor, otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false})})...)
	}
	z := httpCompression(otlpmetrichttp.GzipCompression, otlpmetrichttp.NoCompression)
	return otlpmetrichttp.New(ctx, options(c, optionSet[otlpmetrichttp.Option]{otlpmetrichttp.WithEndpointURL, otlpmetrichttp.WithHeaders,
		otlpmetrichttp.WithTimeout, func(s string) otlpmetrichttp.Option { return otlpmetrichttp.WithCompression(z(s)) },
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false})})...)
}

// newSpanExporter makes the trace exporter of set's protocol (the same settings as the
// metrics', read from the traces signal's variables where the settings leave them).
func newSpanExporter(ctx context.Context, set Settings) (sdktrace.SpanExporter, error) {
	c := set.conn("traces")
	if set.Protocol == ProtocolGRPC {
		c.compress = c.grpcCompressor()
		return otlptracegrpc.New(ctx, options(c, optionSet[otlptracegrpc.Option]{otlptracegrpc.WithEndpointURL, otlptracegrpc.WithHeaders,
			otlptracegrpc.WithTimeout, otlptracegrpc.WithCompressor, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})})...)
	}
	z := httpCompression(otlptracehttp.GzipCompression, otlptracehttp.NoCompression)
	return otlptracehttp.New(ctx, options(c, optionSet[otlptracehttp.Option]{otlptracehttp.WithEndpointURL, otlptracehttp.WithHeaders,
		otlptracehttp.WithTimeout, func(s string) otlptracehttp.Option { return otlptracehttp.WithCompression(z(s)) },
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})})...)
}

// grpcCompressor is the gRPC compressor option's value, "" for none to give. "none" is given
// only over an environment that names a compression (the exporter reports it as not gzip, and
// takes it); without one, no compression is the default already.
func (c conn) grpcCompressor() string {
	if c.compress == "gzip" || c.compress == "none" && c.envZip {
		return c.compress
	}
	return ""
}

// Backoff is the retry delay for steps: min_backoff, doubling up to max_backoff.
func (s *Sink) Backoff() (first, max time.Duration) { return s.set.MinBackoff, s.set.MaxBackoff }

// Write exports r's metrics (those its key set keeps) in one request, then its spans in
// another, when the sink sends spans. A step whose metrics went and whose spans did not is
// retried with its spans only.
func (s *Sink) Write(ctx context.Context, r *step.Record) error {
	if !(s.sent.ok && s.sent.step == r.Step && s.sent.end.Equal(r.End)) {
		rm := s.metrics.record(s.keys.Record(r, s.prefix))
		if err := s.exp.Export(ctx, rm); err != nil {
			return fmt.Errorf("otlp export of step %d: %w", r.Step, err)
		}
	}
	s.sent.ok = false
	if s.spans == nil {
		return nil
	}
	if err := s.spanExp.ExportSpans(ctx, s.spans.record(r)); err != nil {
		s.sent.ok, s.sent.step, s.sent.end = true, r.Step, r.End
		return fmt.Errorf("otlp export of step %d's spans: %w", r.Step, err)
	}
	return nil
}

// Close shuts the exporter down, within ctx's deadline.
func (s *Sink) Close(ctx context.Context) error {
	err := s.exp.Shutdown(ctx)
	if s.spanExp != nil {
		err = errors.Join(err, s.spanExp.Shutdown(ctx))
	}
	if err != nil {
		return fmt.Errorf("otlp sink: %w", err)
	}
	return nil
}
