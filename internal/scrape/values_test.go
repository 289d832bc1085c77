package scrape

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// valuesPart is one part of a layout written by a test.
type valuesPart struct {
	Segments []string `json:"segments"`
	Slots    []int    `json:"slots"`
	Cuts     []int    `json:"cuts"`
	Raw      int      `json:"raw"`
}

// valuesAnswer writes a values answer as the page does: with the layout when withLayout, and
// returns it with the layout's id.
func valuesAnswer(t testing.TB, parts []valuesPart, vals []float64, withLayout bool) (body []byte, id string) {
	t.Helper()
	lb, err := json.Marshal(map[string]any{"v": 1, "parts": parts})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lb)
	id = hex.EncodeToString(sum[:16])
	if !withLayout {
		lb = nil
	}
	body = binary.LittleEndian.AppendUint32(nil, uint32(len(lb)))
	body = append(body, lb...)
	for _, v := range vals {
		body = binary.LittleEndian.AppendUint64(body, math.Float64bits(v))
	}
	return body, id
}

// vllmParts is a counter with two children and a histogram with two children (buckets 0.5, 1,
// +Inf): raw values are the counters', then each child's own bucket values, then the sums.
var vllmParts = []valuesPart{
	{
		Segments: []string{"# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{engine=\"0\"} ", "\nvllm:prompt_tokens_total{engine=\"1\"} ", "\n"},
		Slots:    []int{0, 1}, Raw: 2,
	},
	{
		Segments: []string{
			"# TYPE vllm:e2e_request_latency_seconds histogram\n" +
				"vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"0.5\"} ", "\nvllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"1.0\"} ",
			"\nvllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"+Inf\"} ", "\nvllm:e2e_request_latency_seconds_count{engine=\"0\"} ",
			"\nvllm:e2e_request_latency_seconds_sum{engine=\"0\"} ",
			"\nvllm:e2e_request_latency_seconds_bucket{engine=\"1\",le=\"0.5\"} ", "\nvllm:e2e_request_latency_seconds_bucket{engine=\"1\",le=\"1.0\"} ",
			"\nvllm:e2e_request_latency_seconds_bucket{engine=\"1\",le=\"+Inf\"} ", "\nvllm:e2e_request_latency_seconds_count{engine=\"1\"} ",
			"\nvllm:e2e_request_latency_seconds_sum{engine=\"1\"} ", "\n",
		},
		// derived: child 0's 0, c1, c2, c3; child 1's 0, c1, c2, c3; then the two sums
		Slots: []int{1, 2, 3, 3, 8, 5, 6, 7, 7, 9},
		Cuts:  []int{3, 3}, Raw: 8,
	},
}

// TestValuesAnswerText checks the text written from a values answer: counts added up per child
// from 0 as the page's library adds them, whole numbers as integers, the rest read back exactly.
func TestValuesAnswerText(t *testing.T) {
	vals := []float64{1234, 1e6 + 0.5, 2, 0, 1, 0.1, 0.2, 0.30000000000000004, 3.25, math.Inf(1)}
	body, id := valuesAnswer(t, vllmParts, vals, true)
	var buf bytes.Buffer
	l, err := decodeValues(body, id, nil, 1<<20, &buf)
	if err != nil {
		t.Fatal(err)
	}
	// child 1's cumulative counts: 0.1, then 0.1+0.2 (0.30000000000000004), then that
	// +0.30000000000000004 (0.6000000000000001): added, never read from the text.
	want := strings.Join([]string{
		"# TYPE vllm:prompt_tokens counter",
		`vllm:prompt_tokens_total{engine="0"} 1234`,
		`vllm:prompt_tokens_total{engine="1"} 1.0000005e+06`,
		"# TYPE vllm:e2e_request_latency_seconds histogram",
		`vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.5"} 2`,
		`vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0"} 2`,
		`vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf"} 3`,
		`vllm:e2e_request_latency_seconds_count{engine="0"} 3`,
		`vllm:e2e_request_latency_seconds_sum{engine="0"} 3.25`,
		`vllm:e2e_request_latency_seconds_bucket{engine="1",le="0.5"} 0.1`,
		`vllm:e2e_request_latency_seconds_bucket{engine="1",le="1.0"} 0.30000000000000004`,
		`vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf"} 0.6000000000000001`,
		`vllm:e2e_request_latency_seconds_count{engine="1"} 0.6000000000000001`,
		`vllm:e2e_request_latency_seconds_sum{engine="1"} +Inf`,
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("text:\n%s\nwant:\n%s", got, want)
	}
	if l == nil || l.id != id || l.n != len(vals) {
		t.Fatalf("layout %+v, want id %s with %d values", l, id, len(vals))
	}

	// the next answer holds no layout: the one held is used
	vals[0] = 1235
	body, id2 := valuesAnswer(t, vllmParts, vals, false)
	buf.Reset()
	l2, err := decodeValues(body, id2, l, 1<<20, &buf)
	if err != nil || l2 != l {
		t.Fatalf("answer without a layout: %v (layout %p, held %p)", err, l2, l)
	}
	if !strings.Contains(buf.String(), `vllm:prompt_tokens_total{engine="0"} 1235`+"\n") {
		t.Fatalf("text after the new value:\n%s", buf.String())
	}
}

// TestAppendNumberReadsBack writes awkward values and reads them back as the parser does
// (strconv.ParseFloat on the text), bit for bit.
func TestAppendNumberReadsBack(t *testing.T) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 999999, 1e6, 1e15 - 1, 1e15, 1e16, 123456789012345678,
		0.1, 1.0 / 3, -2.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1)} {
		s := string(appendNumber(nil, v))
		got, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(v) {
			t.Errorf("%v written %q, read back %v (%v)", v, s, got, err)
		}
	}
	if s := string(appendNumber(nil, math.NaN())); s != "NaN" {
		t.Errorf("NaN written %q", s)
	}
}

// TestValuesAnswerRefused checks each malformed answer fails with what was wrong, and that a
// failure leaves no layout held.
func TestValuesAnswerRefused(t *testing.T) {
	vals := make([]float64, 10)
	good, id := valuesAnswer(t, vllmParts, vals, true)
	bare, _ := valuesAnswer(t, vllmParts, vals, false)
	held, err := decodeValues(good, id, nil, 1<<20, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	bad := func(f func(p []valuesPart) []valuesPart) ([]byte, string) {
		ps := make([]valuesPart, len(vllmParts))
		copy(ps, vllmParts)
		return valuesAnswer(t, f(ps), vals, true)
	}
	wrongSlot, wrongSlotID := bad(func(p []valuesPart) []valuesPart {
		p[1].Slots = append([]int{10}, p[1].Slots[1:]...)
		return p
	})
	fewSegments, fewSegmentsID := bad(func(p []valuesPart) []valuesPart { p[0].Segments = p[0].Segments[1:]; return p })
	cutsOver, cutsOverID := bad(func(p []valuesPart) []valuesPart { p[1].Cuts = []int{3, 6}; return p })
	v2 := append(binary.LittleEndian.AppendUint32(nil, 17), []byte(`{"v":2,"parts":[]}`)[:17]...)
	sum := sha256.Sum256(v2[4:])
	cases := []struct {
		name, id string
		body     []byte
		none     bool // the request holds no layout (else the good answer's)
		max      int64
		want     string
	}{
		{"short", id, good[:3], false, 1 << 20, "shorter than its framing"},
		{"layout past the end", id, good[:40], false, 1 << 20, "is longer than the"},
		{"values cut short", id, good[:len(good)-1], false, 1 << 20, "bytes of values, want 80"},
		{"another id", "0123", good, false, 1 << 20, "is not its digest"},
		{"no layout, none held", id, bare, true, 1 << 20, "which the request did not hold"},
		{"no layout, another held", "0123", bare, false, 1 << 20, "which the request did not hold"},
		{"slot past the values", wrongSlotID, wrongSlot, false, 1 << 20, "value from 10 of 10"},
		{"segments", fewSegmentsID, fewSegments, false, 1 << 20, "2 segments for 2 values"},
		{"cuts", cutsOverID, cutsOver, false, 1 << 20, "are more than its 8 values"},
		{"version", hex.EncodeToString(sum[:16]), v2, false, 1 << 20, "layout: unexpected EOF"},
		{"over the size limit", id, good, false, 100, "body exceeds size limit of 100 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &request{url: "http://h/metrics", layout: held}
			if c.none {
				r.layout = nil
			}
			_, err := r.values(c.body, c.id, "", c.max, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "values answer: ") {
				t.Fatalf("err %v, want one saying %q", err, c.want)
			}
			if r.layout != nil || r.layoutID() != noLayout {
				t.Fatalf("a refused answer left layout %q held", r.layoutID())
			}
		})
	}
	r := &request{}
	if _, err := r.values(good, id, "gzip", 1<<20, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "compressed") {
		t.Fatalf("a compressed values answer: %v", err)
	}
	if _, err := r.values(good, id, "", 100, &bytes.Buffer{}); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("over the limit: %v, want ErrBodyTooLarge", err)
	}
}

// FuzzValuesAnswer reads answers made of an arbitrary layout and values, under the layout's
// own id (which a fuzzer could not find), and arbitrary framing: never a panic, and what is read
// is within the size limit.
func FuzzValuesAnswer(f *testing.F) {
	good, _ := valuesAnswer(f, vllmParts, make([]float64, 10), true)
	n := binary.LittleEndian.Uint32(good)
	f.Add(good[4:4+n], good[4+n:], int64(0))
	f.Add([]byte(`{"v":1,"parts":[{"segments":["a ","\n"],"slots":[1],"cuts":[0],"raw":0}]}`), []byte{}, int64(0))
	f.Add([]byte(`{"v":1,"parts":[]}`), []byte{1, 2, 3}, int64(-1))
	f.Fuzz(func(t *testing.T, layoutJSON, vals []byte, framing int64) {
		sum := sha256.Sum256(layoutJSON)
		id := hex.EncodeToString(sum[:16])
		length := uint32(len(layoutJSON))
		if framing != 0 { // a framing that may lie about the layout's length
			length = uint32(framing)
		}
		body := binary.LittleEndian.AppendUint32(nil, length)
		body = append(append(body, layoutJSON...), vals...)
		var buf bytes.Buffer
		l, err := decodeValues(body, id, nil, 4096, &buf)
		if err != nil {
			return
		}
		if buf.Len() > 4096 {
			t.Fatalf("read %d bytes over the limit of 4096", buf.Len())
		}
		// the layout held reads the same values without being sent again
		var again bytes.Buffer
		if _, err := decodeValues(binary.LittleEndian.AppendUint32(nil, 0), id, l, 4096, &again); err == nil && l.n > 0 {
			t.Fatalf("an answer without its %d values was read", l.n)
		}
	})
}
