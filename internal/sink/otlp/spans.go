package otlp

import (
	"context"
	"crypto/rand"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Span names: a step, and each run of a phase in it.
const (
	StepSpan  = "vllmstat.step"
	PhaseSpan = "vllmstat.phase"
)

// spans turns step records into spans: a span per step, from its start to its end, with the
// step's headline figures (the summary key set) as attributes and events for its failed
// scrapes, publishes, engine restarts and departed workers, and a child span per run of each phase. A step whose end the trainer called with a W3C traceparent is a child of the
// trainer's span, in its trace; the others are the roots of one trace per run.
type spans struct {
	prefix   string
	res      *resource.Resource
	scope    instrumentation.Scope
	headline *keyset.Set
	run      trace.TraceID // the trace of the steps without a parent
}

func newSpans(prefix string, res *resource.Resource, version string) *spans {
	sp := &spans{prefix: prefix, res: res, scope: instrumentation.Scope{Name: Scope, Version: version},
		headline: keyset.Settings{Keys: keyset.Summary}.Compile(prefix)}
	rand.Read(sp.run[:])
	return sp
}

// parent is the span context of a W3C traceparent; invalid (no parent) when it is "" or
// malformed, which the specification says to ignore.
func parent(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		rand.Read(id[:])
	}
	return id
}

// workerAttrs names a worker in an event: its target, engine, and worker labels when it has any.
func workerAttrs(w step.WorkerID) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("target", w.Target), attribute.String("engine", w.Engine)}
	if w.Labels != "" {
		attrs = append(attrs, attribute.String("worker_labels", w.Labels))
	}
	return attrs
}

// record returns r's spans, the step's first.
func (sp *spans) record(r *step.Record) []sdktrace.ReadOnlySpan {
	up := parent(r.TraceParent)
	tid := sp.run
	if up.IsValid() {
		tid = up.TraceID()
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceFlags: trace.FlagsSampled})
	attrs := []attribute.KeyValue{attribute.Int64("vllmstat.step", r.Step), attribute.Int("vllmstat.workers", r.Workers),
		attribute.Int("vllmstat.scrapes.ok", r.Scrapes.OK), attribute.Int("vllmstat.scrapes.failed", r.Scrapes.Failed)}
	m := sp.headline.Record(r, sp.prefix).Metrics
	for _, k := range slices.Sorted(maps.Keys(m)) {
		attrs = append(attrs, attribute.Float64(strings.ReplaceAll(k, "/", "."), m[k]))
	}
	var events []sdktrace.Event
	if r.Scrapes.Failed > 0 {
		events = append(events, sdktrace.Event{Name: "scrapes failed", Time: r.End,
			Attributes: []attribute.KeyValue{attribute.Int("count", r.Scrapes.Failed)}})
	}
	for _, p := range r.Publishes {
		events = append(events, sdktrace.Event{Name: "policy published", Time: p.At,
			Attributes: []attribute.KeyValue{attribute.Int64("version", p.Version)}})
	}
	for _, re := range r.Restarts {
		events = append(events, sdktrace.Event{Name: "engine restarted", Time: re.At, Attributes: workerAttrs(re.Worker)})
	}
	if r.RestartsUnlisted > 0 {
		events = append(events, sdktrace.Event{Name: "engine restarts not listed", Time: r.End,
			Attributes: []attribute.KeyValue{attribute.Int("count", r.RestartsUnlisted)}})
	}
	for _, w := range r.Forgotten {
		events = append(events, sdktrace.Event{Name: "worker gone", Time: r.End, Attributes: workerAttrs(w)})
	}
	out := []sdktrace.ReadOnlySpan{tracetest.SpanStub{Name: StepSpan, SpanContext: sc, Parent: up, SpanKind: trace.SpanKindInternal,
		StartTime: r.Start, EndTime: r.End, Attributes: attrs, Events: events, Resource: sp.res, InstrumentationScope: sp.scope}.Snapshot()}
	for _, name := range slices.Sorted(maps.Keys(r.Phases)) {
		for _, run := range r.Phases[name].Runs {
			child := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceFlags: trace.FlagsSampled})
			out = append(out, tracetest.SpanStub{Name: PhaseSpan, SpanContext: child, Parent: sc, SpanKind: trace.SpanKindInternal,
				StartTime: run.Start, EndTime: run.End, Resource: sp.res, InstrumentationScope: sp.scope,
				Attributes: []attribute.KeyValue{attribute.String("phase", name), attribute.Int64("vllmstat.step", r.Step)}}.Snapshot())
		}
	}
	return out
}
