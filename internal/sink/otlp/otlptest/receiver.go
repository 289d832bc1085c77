// Package otlptest is an OTLP metrics and traces receiver on loopback, over HTTP or gRPC, for tests: it
// decodes what it gets with OpenTelemetry's own protobuf definitions. Only _test.go files
// import it.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Receiver is an OTLP metrics receiver on loopback, HTTP or gRPC, decoding requests with
// OpenTelemetry's own protobuf definitions: what it got, with each request's headers.
type Receiver struct {
	URL string // where to send: http://127.0.0.1:port

	mu        sync.Mutex
	requests  []*colmetricpb.ExportMetricsServiceRequest
	headers   []map[string]string
	Encodings []string // each gRPC request's compression
	Fail      int      // requests still to refuse with 503 (HTTP) or Unavailable (gRPC)
	// FailSpans are trace requests still to refuse so.
	FailSpans int
	spans     []*tracepb.ResourceSpans
}

func (rc *Receiver) takeSpans(req *coltracepb.ExportTraceServiceRequest) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.FailSpans > 0 {
		rc.FailSpans--
		return false
	}
	rc.spans = append(rc.spans, req.ResourceSpans...)
	return true
}

// Span is one span as the receiver got it.
type Span struct {
	Name                    string
	TraceID, SpanID, Parent string // hex
	Start, End              time.Time
	Attrs                   map[string]string // values as text
	Events                  []Event
}

// Event is one event of a span.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]string // values as text
}

// Spans returns the spans so far, in the order they came.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []Span
	for _, rs := range rc.spans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s := Span{Name: sp.Name, TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId),
					Parent: hex.EncodeToString(sp.ParentSpanId), Start: time.Unix(0, int64(sp.StartTimeUnixNano)),
					End: time.Unix(0, int64(sp.EndTimeUnixNano))}
				s.Attrs = attrText(sp.Attributes)
				for _, e := range sp.Events {
					s.Events = append(s.Events, Event{Name: e.Name, Time: time.Unix(0, int64(e.TimeUnixNano)), Attrs: attrText(e.Attributes)})
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func attrText(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = anyText(kv.Value)
	}
	return m
}

func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return v.String()
}

func (rc *Receiver) take(req *colmetricpb.ExportMetricsServiceRequest, h map[string]string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.Fail > 0 {
		rc.Fail--
		return false
	}
	rc.requests = append(rc.requests, req)
	rc.headers = append(rc.headers, h)
	return true
}

// Got returns the requests so far, each with its headers (authorization, content-encoding).
func (rc *Receiver) Got() ([]*colmetricpb.ExportMetricsServiceRequest, []map[string]string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.requests), slices.Clone(rc.headers)
}

// StartHTTP starts a receiver of OTLP/HTTP protobuf requests at /v1/metrics and /v1/traces.
func StartHTTP(t *testing.T) *Receiver {
	rc := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path != "/v1/metrics" && r.URL.Path != "/v1/traces") || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/metrics or /v1/traces", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ok bool
		var answer proto.Message
		if r.URL.Path == "/v1/traces" {
			req := &coltracepb.ExportTraceServiceRequest{}
			if err := proto.Unmarshal(b, req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ok, answer = rc.takeSpans(req), &coltracepb.ExportTraceServiceResponse{}
		} else {
			req := &colmetricpb.ExportMetricsServiceRequest{}
			if err := proto.Unmarshal(b, req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			h := map[string]string{"content-encoding": r.Header.Get("Content-Encoding"), "authorization": r.Header.Get("Authorization")}
			ok, answer = rc.take(req, h), &colmetricpb.ExportMetricsServiceResponse{}
		}
		if !ok {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		out, _ := proto.Marshal(answer)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

type grpcReceiver struct {
	colmetricpb.UnimplementedMetricsServiceServer
	rc *Receiver
}

func (g grpcReceiver) Export(ctx context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := map[string]string{}
	for _, k := range []string{"authorization"} {
		if v := md.Get(k); len(v) > 0 {
			h[k] = v[0]
		}
	}
	if !g.rc.take(req, h) {
		return nil, errUnavailable
	}
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

type grpcTraceReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	rc *Receiver
}

func (g grpcTraceReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if !g.rc.takeSpans(req) {
		return nil, errUnavailable
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// encodings notes each gRPC request's compression, which its metadata does not show.
type encodings struct{ rc *Receiver }

func (encodings) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (encodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (encodings) HandleConn(context.Context, stats.ConnStats)                       {}
func (e encodings) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		e.rc.mu.Lock()
		e.rc.Encodings = append(e.rc.Encodings, h.Compression)
		e.rc.mu.Unlock()
	}
}

var errUnavailable = status.Error(codes.Unavailable, "try later")

// StartGRPC starts a receiver of OTLP/gRPC metrics and traces.
func StartGRPC(t *testing.T) *Receiver {
	rc := &Receiver{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.StatsHandler(encodings{rc}))
	colmetricpb.RegisterMetricsServiceServer(s, grpcReceiver{rc: rc})
	coltracepb.RegisterTraceServiceServer(s, grpcTraceReceiver{rc: rc})
	go s.Serve(l)
	t.Cleanup(s.Stop)
	rc.URL = "http://" + l.Addr().String()
	return rc
}

// Point is one data point as the receiver got it, named as steps.jsonl would key it.
type Point struct {
	Name  string
	Attrs string
	T     time.Time
	V     float64
	Unit  string
}

// Points are the gauge data points of reqs, in order; scope is the instrumentation scope every
// one must have.
func Points(t testing.TB, scope string, reqs []*colmetricpb.ExportMetricsServiceRequest) []Point {
	var out []Point
	for _, req := range reqs {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				if sm.Scope.GetName() != scope {
					t.Errorf("scope %q, want %q", sm.Scope.GetName(), scope)
				}
				for _, m := range sm.Metrics {
					g := m.GetGauge()
					if g == nil {
						t.Fatalf("%s is not a gauge: %v", m.Name, m.Data)
					}
					for _, dp := range g.DataPoints {
						out = append(out, Point{m.Name, AttrString(dp.Attributes), time.Unix(0, int64(dp.TimeUnixNano)), dp.GetAsDouble(), m.Unit})
					}
				}
			}
		}
	}
	return out
}

// AttrString is attributes as sorted name=value pairs, comma-separated.
func AttrString(kvs []*commonpb.KeyValue) string {
	var s []string
	for _, kv := range kvs {
		s = append(s, kv.Key+"="+kv.Value.GetStringValue())
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// Want are the data points a record's keys make, keyed as Point.Key keys them: each key of
// steps.jsonl, of the step, each phase and each worker, named by its Prometheus family and
// labels (vllm.PromName) under the namespaces vllmstat.step. and vllmstat.step.worker.
func Want(r *step.Record) map[string]float64 {
	out := map[string]float64{}
	add := func(ns string, base []promname.Label, metrics map[string]float64) {
		for k, v := range metrics {
			fam, ls := vllm.PromName(vllm.Prefix, k, nil)
			var s []string
			for _, l := range base {
				if l.Value != "" {
					s = append(s, l.Name+"="+l.Value)
				}
			}
			for _, l := range ls {
				s = append(s, l.Name+"="+l.Value)
			}
			slices.Sort(s)
			out[ns+fam+"{"+strings.Join(s, ",")+"}"] = v
		}
	}
	add("vllmstat.step.", nil, r.Metrics)
	for name, ph := range r.Phases {
		add("vllmstat.step.", []promname.Label{{Name: "phase", Value: name}}, ph.Metrics)
	}
	for _, w := range r.PerWorker {
		add("vllmstat.step.worker.", []promname.Label{{Name: "target", Value: w.Target}, {Name: "engine", Value: w.Engine}, {Name: "worker_labels", Value: page.LabelKey(w.Labels)}}, w.Metrics)
	}
	out["vllmstat.step.number{}"] = float64(r.Step)
	out["vllmstat.step.duration_seconds{}"] = r.DurationS
	out["vllmstat.step.workers{}"] = float64(r.Workers)
	return out
}

// Key is a point's name and attributes, as Want keys them.
func (p Point) Key() string { return p.Name + "{" + p.Attrs + "}" }
