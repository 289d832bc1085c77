package timeline

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// errFallback sends decoding to encoding/json: the input is not laid out as Marshal writes it.
var errFallback = errors.New("not in the usual layout")

// decodeFast decodes a timeline file written by Marshal (any whitespace, keys in any order)
// about ten times faster than encoding/json, which matters for reports of hundreds of large
// files. Anything else it does not expect (another key, a string with escapes) makes it give
// up with errFallback, and Unmarshal falls back to encoding/json.
func decodeFast(data []byte) (*File, error) {
	d := decoder{b: data}
	f := &File{}
	seen := map[string]bool{}
	err := d.object(func(key []byte) error {
		if seen[string(key)] {
			return errFallback // encoding/json merges repeated keys in ways not worth copying
		}
		seen[string(key)] = true
		switch string(key) {
		case "step":
			v, err := d.number()
			if err != nil || v != math.Trunc(v) {
				return errFallback
			}
			f.Step = int64(v)
		case "start", "end":
			s, err := d.str()
			if err != nil {
				return err
			}
			t, err := time.Parse(time.RFC3339Nano, string(s))
			if err != nil {
				return errFallback
			}
			if key[0] == 's' {
				f.Start = t
			} else {
				f.End = t
			}
		case "workers":
			f.Workers = []Worker{}
			return d.array(func() error {
				w, err := d.worker()
				f.Workers = append(f.Workers, w)
				return err
			})
		default:
			return errFallback
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if d.ws(); d.i != len(d.b) {
		return nil, errFallback
	}
	return f, nil
}

type decoder struct {
	b []byte
	i int
}

func (d *decoder) ws() {
	for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\n' || d.b[d.i] == '\t' || d.b[d.i] == '\r') {
		d.i++
	}
}

func (d *decoder) expect(c byte) error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != c {
		return errFallback
	}
	d.i++
	return nil
}

// peek skips whitespace and reports whether the next byte is c, consuming it if so.
func (d *decoder) peek(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object calls member for each key, with the input at the key's value.
func (d *decoder) object(member func(key []byte) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek('}') {
		return nil
	}
	for {
		key, err := d.str()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		if d.peek(',') {
			continue
		}
		return d.expect('}')
	}
}

// array calls elem for each element, with the input at the element.
func (d *decoder) array(elem func() error) error {
	if err := d.expect('['); err != nil {
		return err
	}
	if d.peek(']') {
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if d.peek(',') {
			continue
		}
		return d.expect(']')
	}
}

// str reads an ASCII string without escapes and returns its bytes (a slice of the input).
func (d *decoder) str() ([]byte, error) {
	if err := d.expect('"'); err != nil {
		return nil, err
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], nil
		case c == '\\' || c < 0x20 || c >= 0x80: // escapes, control bytes, non-ASCII (invalid UTF-8 is replaced)
			return nil, errFallback
		}
		d.i++
	}
	return nil, errFallback
}

// number reads a JSON number. Plain decimals with at most 15 digits are computed exactly
// (an integer below 2^53 divided by a power of ten up to 10^22 rounds correctly); others go
// through strconv.
func (d *decoder) number() (float64, error) {
	d.ws()
	b, start := d.b, d.i
	i := start
	digit := func() bool { return i < len(b) && b[i] >= '0' && b[i] <= '9' }
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	var mant uint64
	digits, frac := 0, 0
	switch {
	case i < len(b) && b[i] == '0':
		i++
		digits++
	case digit():
		for ; digit(); i++ {
			mant = mant*10 + uint64(b[i]-'0')
			digits++
		}
	default:
		return 0, errFallback
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digit() {
			return 0, errFallback
		}
		for ; digit(); i++ {
			mant = mant*10 + uint64(b[i]-'0')
			digits++
			frac++
		}
	}
	exp := false
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		exp = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digit() {
			return 0, errFallback
		}
		for digit() {
			i++
		}
	}
	d.i = i
	if exp || digits > 15 {
		v, err := strconv.ParseFloat(string(b[start:i]), 64)
		if err != nil {
			return 0, errFallback
		}
		return v, nil
	}
	v := float64(mant) / pow10[frac]
	if neg {
		v = -v
	}
	return v, nil
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16}

func (d *decoder) worker() (Worker, error) {
	var w Worker
	var seen [7]bool
	err := d.object(func(key []byte) error {
		k := slicesIndex(string(key))
		if k < 0 || seen[k] {
			return errFallback
		}
		seen[k] = true
		switch string(key) {
		case "target", "engine":
			s, err := d.str()
			if err != nil {
				return err
			}
			if key[0] == 't' {
				w.Target = string(s)
			} else {
				w.Engine = string(s)
			}
		case "labels":
			w.Labels = map[string]string{}
			return d.object(func(name []byte) error {
				v, err := d.str()
				w.Labels[string(name)] = string(v)
				return err
			})
		case "busy_s", "idle_s", "last_busy_s":
			v, err := d.number()
			if err != nil {
				return err
			}
			switch key[0] {
			case 'b':
				w.BusyS = &v
			case 'i':
				w.IdleS = &v
			default:
				w.LastBusyS = &v
			}
		case "series":
			w.Series = map[string][]step.Point{}
			return d.object(func(name []byte) error {
				ps, err := d.points()
				w.Series[string(name)] = ps
				return err
			})
		default:
			return errFallback
		}
		return nil
	})
	return w, err
}

// slicesIndex numbers the keys of a worker object, -1 for any other.
func slicesIndex(key string) int {
	switch key {
	case "target":
		return 0
	case "engine":
		return 1
	case "series":
		return 2
	case "labels":
		return 3
	case "busy_s":
		return 4
	case "idle_s":
		return 5
	case "last_busy_s":
		return 6
	}
	return -1
}

func (d *decoder) points() ([]step.Point, error) {
	ps := []step.Point{}
	err := d.array(func() error {
		var p step.Point
		seen := 0
		err := d.object(func(key []byte) error {
			v, err := d.number()
			switch {
			case err != nil:
				return err
			case len(key) == 1 && key[0] == 't':
				p.OffsetS = v
			case len(key) == 1 && key[0] == 'v':
				p.Value = v
			default:
				return errFallback
			}
			seen++
			return nil
		})
		if err == nil && seen != 2 {
			err = errFallback
		}
		ps = append(ps, p)
		return err
	})
	return ps, err
}

// decodeJSON is the plain encoding/json decoder, for files in any other layout.
func decodeJSON(data []byte) (*File, error) {
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	return &f, nil
}
