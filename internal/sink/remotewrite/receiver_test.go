package remotewrite

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// decodedSeries is a TimeSeries as the test's own decoder reads it.
type decodedSeries struct {
	Labels  [][2]string
	Samples [][2]float64 // value, timestamp
}

// key is the series' labels as name=value pairs in their order.
func (s decodedSeries) key() string {
	var parts []string
	for _, l := range s.Labels {
		parts = append(parts, l[0]+"="+l[1])
	}
	return strings.Join(parts, ",")
}

// decodeWriteRequest reads a WriteRequest field by field, rejecting anything unexpected.
func decodeWriteRequest(b []byte) ([]decodedSeries, error) {
	var out []decodedSeries
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return fmt.Errorf("WriteRequest: unexpected field %d type %d", num, typ)
		}
		var ts decodedSeries
		err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			switch {
			case num == 1 && typ == protowire.BytesType:
				var l [2]string
				err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					if (num != 1 && num != 2) || typ != protowire.BytesType {
						return fmt.Errorf("Label: unexpected field %d", num)
					}
					l[num-1] = string(v)
					return nil
				})
				ts.Labels = append(ts.Labels, l)
				return err
			case num == 2 && typ == protowire.BytesType:
				var s [2]float64
				err := fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
					switch {
					case num == 1 && typ == protowire.Fixed64Type:
						s[0] = math.Float64frombits(x)
					case num == 2 && typ == protowire.VarintType:
						s[1] = float64(int64(x))
					default:
						return fmt.Errorf("Sample: unexpected field %d type %d", num, typ)
					}
					return nil
				})
				ts.Samples = append(ts.Samples, s)
				return err
			}
			return fmt.Errorf("TimeSeries: unexpected field %d type %d", num, typ)
		})
		out = append(out, ts)
		return err
	})
	return out, err
}

func fields(b []byte, fn func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			return fmt.Errorf("unexpected wire type %d", typ)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// checkLabels reports labels not in remote write's order: __name__ first, then sorted names,
// no duplicates and no empty values.
func checkLabels(ls [][2]string) error {
	if len(ls) == 0 || ls[0][0] != "__name__" {
		return fmt.Errorf("labels %v: __name__ is not first", ls)
	}
	for i, l := range ls {
		if l[1] == "" {
			return fmt.Errorf("labels %v: empty value of %s", ls, l[0])
		}
		if i > 1 && ls[i-1][0] >= l[0] {
			return fmt.Errorf("labels %v: not sorted", ls)
		}
	}
	return nil
}

// mode is how the receiver answers.
type mode struct {
	status     int    // answer with this status instead of storing (0: store and answer 204)
	body       string // body of a non-2xx answer
	retryAfter string
	hang       bool // wait until the client gives up
}

// receiver is a remote-write endpoint on a loopback port that can go down and come back.
type receiver struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	// isDown makes it close each request's connection unanswered (see down).
	isDown bool
	// modes are used one per request, then def.
	modes    []mode
	def      mode
	requests int
	headers  []http.Header
	series   map[string][][2]float64 // stored samples by series
	samples  int
	bad      []error
}

func newReceiver(t *testing.T) *receiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, addr: ln.Addr().String(), series: map[string][][2]float64{}}
	srv := &http.Server{Handler: http.HandlerFunc(r.handle)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *receiver) url() string { return "http://" + r.addr + "/api/v1/write" }

// down makes every request fail until up: its connection is closed unanswered. The port stays
// the receiver's: one given back could be taken meanwhile by another test's listener or
// connection, and the receiver could not come back.
func (r *receiver) down() {
	r.mu.Lock()
	r.isDown = true
	r.mu.Unlock()
}

func (r *receiver) up() {
	r.mu.Lock()
	r.isDown = false
	r.mu.Unlock()
}

func (r *receiver) set(def mode, next ...mode) {
	r.mu.Lock()
	r.def, r.modes = def, next
	r.mu.Unlock()
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.isDown {
		r.mu.Unlock()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	r.requests++
	r.headers = append(r.headers, req.Header.Clone())
	m := r.def
	if len(r.modes) > 0 {
		m, r.modes = r.modes[0], r.modes[1:]
	}
	r.mu.Unlock()
	if m.hang {
		<-req.Context().Done()
		return
	}
	if m.status != 0 {
		if m.retryAfter != "" {
			w.Header().Set("Retry-After", m.retryAfter)
		}
		http.Error(w, m.body, m.status)
		return
	}
	err := r.store(req)
	if err != nil {
		r.mu.Lock()
		r.bad = append(r.bad, err)
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) store(req *http.Request) error {
	if req.Method != http.MethodPost {
		return errors.New("method " + req.Method)
	}
	for k, want := range map[string]string{"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
		"X-Prometheus-Remote-Write-Version": "0.1.0", "User-Agent": "vllmstat"} {
		if got := req.Header.Get(k); got != want {
			return fmt.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	raw, err := snappy.Decode(nil, b)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	series, err := decodeWriteRequest(raw)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range series {
		if err := checkLabels(s.Labels); err != nil {
			return err
		}
		k := s.key()
		r.series[k] = append(r.series[k], s.Samples...)
		r.samples += len(s.Samples)
	}
	return nil
}

// stored returns a copy of what was stored, and how many samples.
func (r *receiver) stored() (map[string][][2]float64, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		r.t.Errorf("receiver saw bad requests: %v", r.bad)
	}
	out := map[string][][2]float64{}
	for k, v := range r.series {
		out[k] = slices.Clone(v)
	}
	return out, r.samples, r.requests
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
