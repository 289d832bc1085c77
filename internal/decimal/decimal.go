// Package decimal reads the numbers people type into flags, config files and API requests:
// step numbers, policy versions, counts and settings. They are read in decimal only. Go's
// flag package reads integers with strconv's base 0 and YAML 1.1 reads 010 as octal, so a
// zero-padded checkpoint step such as 000120 would be read as 80 and a resume would cut the
// wrong steps; here leading zeros are decimal and a 0x, 0b or 0o prefix is refused, never
// read in another base.
package decimal

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// ErrPrefix is the error of a number written with a 0x, 0b or 0o prefix.
var ErrPrefix = errors.New("must be a whole number in decimal digits: 0x, 0b and 0o prefixes are not read (leading zeros are, as decimal)")

// ErrNotWhole is the error of anything else that is not a whole number in decimal digits.
var ErrNotWhole = errors.New("must be a whole number in decimal digits")

// ErrNotFinite is the error of a number that is not a finite decimal number.
var ErrNotFinite = errors.New("must be a finite number in decimal digits (not inf, nan or 0x...)")

// ParseInt reads s, an optional sign and decimal digits, as a signed integer of bitSize bits
// (0 for int). Leading zeros are decimal: "010" is 10.
func ParseInt(s string, bitSize int) (int64, error) {
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 {
		return 0, ErrNotWhole
	}
	if hasPrefix(digits) {
		return 0, ErrPrefix
	}
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, ErrNotWhole
	}
	n, err := strconv.ParseInt(s, 10, bitSize)
	if err != nil {
		if bitSize == 0 {
			bitSize = strconv.IntSize
		}
		return 0, errors.New("must be a whole number from -2^" + strconv.Itoa(bitSize-1) + " to 2^" + strconv.Itoa(bitSize-1) + "-1")
	}
	return n, nil
}

// ParseFloat reads s as a finite decimal number: "0.5", "1e3", "010" (10). Inf, NaN, hexadecimal
// floats ("0x1p4") and numbers too large for a float64 are refused.
func ParseFloat(s string) (float64, error) {
	if hasPrefix(strings.TrimLeft(s, "+-")) || strings.ContainsAny(s, "xX_") {
		return 0, ErrNotFinite
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, ErrNotFinite
	}
	return f, nil
}

// hasPrefix reports whether s starts with a base prefix, 0x, 0b or 0o, in either case.
func hasPrefix(s string) bool {
	if len(s) < 2 || s[0] != '0' {
		return false
	}
	switch s[1] {
	case 'x', 'X', 'b', 'B', 'o', 'O':
		return true
	}
	return false
}
