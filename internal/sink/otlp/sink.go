// Package otlp is the otlp sink: it sends every closed step to an OpenTelemetry receiver (an
// OpenTelemetry Collector, or a store that takes OTLP) as OTLP metrics, over HTTP/protobuf or
// gRPC, through OpenTelemetry's own exporters.
package otlp

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

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
	log     *slog.Logger
}

// New makes the sink's exporter (no connection is made before the first export).
func New(set Settings, prefix string, log *slog.Logger) (*Sink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx := context.Background()
	// What the exporters report beside their errors (a receiver's partial success, say) goes to
	// the run's log; it is the process's one handler.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry", "sink", "otlp", "err", err) }))
	res, err := newResource(ctx, set.ResourceAttributes)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: resource attributes: %w", err)
	}
	exp, err := newExporter(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	where := target.Redact(set.Endpoint)
	if where == "" {
		where = "from the environment"
	}
	return &Sink{set: set, prefix: prefix, keys: set.Settings.Compile(prefix), exp: exp,
		metrics: newMetrics(prefix, res, version.Number()),
		log:     log.With("sink", "otlp", "protocol", set.Protocol, "endpoint", where)}, nil
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

// newExporter makes the exporter of set's protocol; the exporter reads the
// OTEL_EXPORTER_OTLP_* variables itself, and set's keys, given as options, override them.
func newExporter(ctx context.Context, set Settings) (exporter, error) {
	endpoint := set.Endpoint
	if set.Protocol == ProtocolGRPC {
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false})}
		if endpoint != "" {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(endpoint))
		}
		if set.Headers != nil {
			opts = append(opts, otlpmetricgrpc.WithHeaders(set.Headers))
		}
		if set.Timeout > 0 {
			opts = append(opts, otlpmetricgrpc.WithTimeout(set.Timeout))
		}
		switch set.Compression {
		case "gzip":
			opts = append(opts, otlpmetricgrpc.WithCompressor("gzip"))
		case "none":
			if set.fromEnv("COMPRESSION") != "" { // else none is the default already
				opts = append(opts, otlpmetricgrpc.WithCompressor("none")) // (reported as not gzip, and taken)
			}
		}
		return otlpmetricgrpc.New(ctx, opts...)
	}
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false})}
	if endpoint != "" {
		// A URL without a path is the receiver's base, as OTEL_EXPORTER_OTLP_ENDPOINT is.
		if u, err := url.Parse(endpoint); err == nil && (u.Path == "" || u.Path == "/") {
			u.Path = "/v1/metrics"
			endpoint = u.String()
		}
		opts = append(opts, otlpmetrichttp.WithEndpointURL(endpoint))
	}
	if set.Headers != nil {
		opts = append(opts, otlpmetrichttp.WithHeaders(set.Headers))
	}
	if set.Timeout > 0 {
		opts = append(opts, otlpmetrichttp.WithTimeout(set.Timeout))
	}
	switch set.Compression {
	case "gzip":
		opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
	case "none":
		opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.NoCompression))
	}
	return otlpmetrichttp.New(ctx, opts...)
}

// Backoff is the retry delay for steps: min_backoff, doubling up to max_backoff.
func (s *Sink) Backoff() (first, max time.Duration) { return s.set.MinBackoff, s.set.MaxBackoff }

// Write exports r's metrics (those its key set keeps) in one request.
func (s *Sink) Write(ctx context.Context, r *step.Record) error {
	rm := s.metrics.record(s.keys.Record(r, s.prefix))
	if err := s.exp.Export(ctx, rm); err != nil {
		return fmt.Errorf("otlp export of step %d: %w", r.Step, err)
	}
	return nil
}

// Close shuts the exporter down, within ctx's deadline.
func (s *Sink) Close(ctx context.Context) error {
	if err := s.exp.Shutdown(ctx); err != nil {
		return fmt.Errorf("otlp sink: %w", err)
	}
	return nil
}
