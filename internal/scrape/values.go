package scrape

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"strconv"
)

// The values answer of vllmstat's Python page (expose()): for vllmstat's restricted request,
// sent with layoutHeader, the page may answer its text's layout once, whenever it changes, and
// on every scrape only its metric objects' raw values as float64. With eight engines in one
// process the text is 233 KB: writing and sending it cost the engine's process about 650 µs of
// CPU per busy scrape, most of it holding the GIL its engine threads need. The scraper writes
// the same text from the layout and the values and reads it as any page (a recording keeps that
// text). docs/performance.md has the figures, and the format.
const (
	valuesType   = "application/vnd.vllmstat.values"
	layoutHeader = "X-Vllmstat-Layout"
	noLayout     = "none" // the layout header of a scraper that holds none
	// maxValues bounds the values of one layout: a page of 8 engines has about 3,000, and a
	// page's series are bounded by max_series_per_target long after this.
	maxValues = 1 << 22
)

// isValuesAnswer reports whether an answer's Content-Type is the values answer's.
func isValuesAnswer(contentType string) bool {
	if contentType == valuesType {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == valuesType
}

// layout is a values answer's layout: the text of each part (a metric) between its values, and
// where each value of the text comes from.
type layout struct {
	id    string
	parts []layoutPart
	n     int // the values an answer sends: the parts' raw values, one after another
	size  int // the text's bytes without its values
	// most is the largest part's derived values: each part's are made in one slice that size.
	most int
}

type layoutPart struct {
	segments [][]byte // the text before each value, and after the last
	slots    []int    // each value of the text: an index into the derived values
	cuts     []int    // a histogram's children's bucket counts; nil for a counter or a gauge
	raw      int      // the values the answer sends for this part
	derived  int      // the derived values: raw, or a histogram's cumulative counts and sums
}

// layoutJSON is the layout as the page sends it.
type layoutJSON struct {
	V     int `json:"v"`
	Parts []struct {
		Segments []string `json:"segments"`
		Slots    []int    `json:"slots"`
		Cuts     []int    `json:"cuts"`
		Raw      int      `json:"raw"`
	} `json:"parts"`
}

// parseLayout reads and checks a layout, whose id is the first 32 hex digits of its SHA-256.
func parseLayout(b []byte, id string) (*layout, error) {
	sum := sha256.Sum256(b)
	if want := hex.EncodeToString(sum[:16]); id != want {
		return nil, fmt.Errorf("layout's id %.40q is not its digest %s", id, want)
	}
	var lj layoutJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lj); err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	if lj.V != 1 {
		return nil, fmt.Errorf("layout version %d, want 1", lj.V)
	}
	l := &layout{id: id, parts: make([]layoutPart, len(lj.Parts))}
	for i, pj := range lj.Parts {
		p := &l.parts[i]
		if len(pj.Segments) != len(pj.Slots)+1 {
			return nil, fmt.Errorf("layout part %d: %d segments for %d values, want one more", i, len(pj.Segments), len(pj.Slots))
		}
		if pj.Raw < 0 || pj.Raw > maxValues-l.n {
			return nil, fmt.Errorf("layout part %d: %d values, over the %d of an answer", i, pj.Raw, maxValues)
		}
		p.raw, p.derived, p.slots = pj.Raw, pj.Raw, pj.Slots
		if pj.Cuts != nil {
			buckets := 0
			for _, c := range pj.Cuts {
				if c < 0 || c > pj.Raw-buckets {
					return nil, fmt.Errorf("layout part %d: children's buckets %v are more than its %d values", i, pj.Cuts, pj.Raw)
				}
				buckets += c
			}
			p.cuts = pj.Cuts
			p.derived = pj.Raw + len(pj.Cuts) // each child's counts start with a 0
		}
		for _, s := range pj.Slots {
			if s < 0 || s >= p.derived {
				return nil, fmt.Errorf("layout part %d: value from %d of %d", i, s, p.derived)
			}
		}
		p.segments = make([][]byte, len(pj.Segments))
		for k, s := range pj.Segments {
			p.segments[k] = []byte(s)
			l.size += len(s)
		}
		l.n += p.raw
		l.most = max(l.most, p.derived)
	}
	return l, nil
}

// decodeValues reads a values answer (body) whose layout id is id, with held the layout the
// request said it holds (nil for none), and writes its text into buf. It returns the layout the
// text came from, which the next request holds.
func decodeValues(body []byte, id string, held *layout, maxBody int64, buf *bytes.Buffer) (*layout, error) {
	if len(body) < 4 {
		return nil, fmt.Errorf("values answer of %d bytes, shorter than its framing", len(body))
	}
	n := binary.LittleEndian.Uint32(body)
	body = body[4:]
	l := held
	switch {
	case uint64(n) > uint64(len(body)):
		return nil, fmt.Errorf("values answer's layout of %d bytes is longer than the %d bytes after it", n, len(body))
	case n > 0:
		var err error
		if l, err = parseLayout(body[:n], id); err != nil {
			return nil, err
		}
		body = body[n:]
	case held == nil || held.id != id:
		return nil, fmt.Errorf("values answer without a layout for id %.40q, which the request did not hold", id)
	}
	if len(body) != 8*l.n {
		return nil, fmt.Errorf("values answer has %d bytes of values, want %d for %d values", len(body), 8*l.n, l.n)
	}
	if int64(l.size) > maxBody {
		return nil, fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
	}
	buf.Grow(int(min(int64(l.size+12*l.n), maxBody)))
	out := buf.AvailableBuffer()
	derived := make([]float64, 0, l.most)
	for i := range l.parts {
		p := &l.parts[i]
		derived = p.derive(derived[:0], body[:8*p.raw])
		body = body[8*p.raw:]
		out = append(out, p.segments[0]...)
		for k, s := range p.slots {
			out = appendNumber(out, derived[s])
			out = append(out, p.segments[k+1]...)
		}
		if int64(len(out)) > maxBody {
			return nil, fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
		}
	}
	buf.Write(out)
	return l, nil
}

// derive appends the part's derived values to d: the raw values of a counter or a gauge; a
// histogram's children's cumulative counts, each from 0, added up left to right as the page's
// library adds them, then the sums.
func (p *layoutPart) derive(d []float64, raw []byte) []float64 {
	at := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:])) }
	i := 0
	for _, c := range p.cuts {
		acc := 0.0
		d = append(d, acc)
		for range c {
			acc += at(i)
			d = append(d, acc)
			i++
		}
	}
	for ; i < p.raw; i++ {
		d = append(d, at(i))
	}
	return d
}

// appendNumber writes v as Prometheus text reads it back: whole numbers as integers (most are
// counts), -0 with its sign, the rest in Go's shortest form that reads back as v.
func appendNumber(dst []byte, v float64) []byte {
	switch {
	case v == 0 && math.Signbit(v):
		return append(dst, "-0"...)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.AppendInt(dst, int64(v), 10)
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}

// values reads a values answer to r's restricted request into buf, and keeps its layout for the
// next request; an answer it cannot read fails the scrape, and the next request holds none.
func (r *request) values(body []byte, id, encoding string, maxBody int64, buf *bytes.Buffer) ([]byte, error) {
	var l *layout
	gz, err := pageEncoding(encoding)
	if err == nil && gz {
		err = errors.New("compressed, which it never is")
	}
	if err == nil {
		l, err = decodeValues(body, id, r.layout, maxBody, buf)
	}
	r.layout = l
	if err != nil {
		return nil, r.fetchError(fmt.Errorf("values answer: %w", err))
	}
	return buf.Bytes(), nil
}

// layoutID is the layout header of r's restricted request: the id of the layout r holds.
func (r *request) layoutID() string {
	if r.layout == nil {
		return noLayout
	}
	return r.layout.id
}
