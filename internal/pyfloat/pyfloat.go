// Package pyfloat prints numbers as Python's prometheus_client prints them on a text page,
// which is how vLLM's pages print every number.
package pyfloat

import (
	"math"
	"strconv"
)

// AppendRepr appends Python's repr(float) of v: the shortest digits that round-trip, written
// in fixed notation when the decimal exponent is in [-4, 16) and in exponent notation otherwise,
// with a sign and at least two exponent digits ("1e-05", "1.5e+16"), and ".0" on integral values
// in fixed notation. vLLM's pages are printed by Python, so every number on them goes through
// this function (or through AppendGo, which builds on it).
func AppendRepr(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "nan"...)
	case math.IsInf(v, 1):
		return append(dst, "inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-inf"...)
	}
	if v == 0 {
		if math.Signbit(v) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	// Go's shortest formatting picks the same digits as Python's (both give the shortest string
	// that round-trips, nearest to the exact value); only the layout differs.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], v, 'e', -1, 64)
	neg := e[0] == '-'
	if neg {
		e = e[1:]
		dst = append(dst, '-')
	}
	// e is "d.ddde±XX" or "de±XX".
	ePos := 0
	for ePos < len(e) && e[ePos] != 'e' {
		ePos++
	}
	mant := e[:ePos]
	exp, _ := strconv.Atoi(string(e[ePos+1:]))
	var digits [24]byte
	nd := 0
	for _, c := range mant {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	if exp < -4 || exp >= 16 {
		dst = append(dst, digits[0])
		if nd > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:nd]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	// Fixed notation: the decimal point sits after digit number exp+1.
	point := exp + 1
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -point; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits[:nd]...)
	case point >= nd:
		dst = append(dst, digits[:nd]...)
		for i := nd; i < point; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	default:
		dst = append(dst, digits[:point]...)
		dst = append(dst, '.')
		dst = append(dst, digits[point:nd]...)
	}
	return dst
}

// AppendGo appends v the way prometheus_client's text exposition prints a sample value or an
// "le" label (floatToGoString): "+Inf", "-Inf" and "NaN" for the special values, and
// Python's repr otherwise, except that a positive value with more than six digits before the
// point switches to exponent form the way Go would ("3.3636352e+07"). The exponent is written as
// "e+0" followed by the digit count, which is why very large values would get three digits; that
// quirk is kept on purpose.
func AppendGo(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	}
	start := len(dst)
	dst = AppendRepr(dst, v)
	s := dst[start:]
	dot := -1
	for i, c := range s {
		if c == '.' {
			dot = i
			break
		}
	}
	if !(v > 0 && dot > 6) {
		return dst
	}
	// mantissa = s[0] "." s[1:dot] s[dot+1:], then strip trailing '0' and '.' characters.
	var m [40]byte
	mb := append(m[:0], s[0], '.')
	mb = append(mb, s[1:dot]...)
	mb = append(mb, s[dot+1:]...)
	for len(mb) > 0 && (mb[len(mb)-1] == '0' || mb[len(mb)-1] == '.') {
		mb = mb[:len(mb)-1]
	}
	dst = append(dst[:start], mb...)
	dst = append(dst, "e+0"...)
	return strconv.AppendInt(dst, int64(dot-1), 10)
}

// Repr is AppendRepr for callers that want a string.
func Repr(v float64) string { return string(AppendRepr(nil, v)) }

// FormatGo is AppendGo for callers that want a string.
func FormatGo(v float64) string { return string(AppendGo(nil, v)) }
