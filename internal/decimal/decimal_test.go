package decimal

import (
	"errors"
	"testing"
)

func TestParseInt(t *testing.T) {
	for _, tt := range []struct {
		in   string
		bits int
		want int64
		err  error // nil: want is the value
	}{
		{"0", 64, 0, nil},
		{"10", 64, 10, nil},
		{"010", 64, 10, nil},
		{"000120", 64, 120, nil},
		{"08", 64, 8, nil},
		{"-07", 64, -7, nil},
		{"+12", 64, 12, nil},
		{"9223372036854775807", 64, 1<<63 - 1, nil},
		{"0x8", 64, 0, ErrPrefix},
		{"0X8", 64, 0, ErrPrefix},
		{"0b1000", 64, 0, ErrPrefix},
		{"0o10", 64, 0, ErrPrefix},
		{"-0x8", 64, 0, ErrPrefix},
		{"", 64, 0, ErrNotWhole},
		{"-", 64, 0, ErrNotWhole},
		{"--1", 64, 0, ErrNotWhole},
		{"1_000", 64, 0, ErrNotWhole},
		{"1.5", 64, 0, ErrNotWhole},
		{"1e3", 64, 0, ErrNotWhole},
		{" 1", 64, 0, ErrNotWhole},
		{"x", 64, 0, ErrNotWhole},
	} {
		got, err := ParseInt(tt.in, tt.bits)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("ParseInt(%q) = %d, %v; want error %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseInt(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"9223372036854775808", "-9223372036854775809"} {
		if _, err := ParseInt(in, 64); err == nil || err.Error() != "must be a whole number from -2^63 to 2^63-1" {
			t.Errorf("ParseInt(%q): %v, want the range", in, err)
		}
	}
	if _, err := ParseInt("2147483648", 32); err == nil || err.Error() != "must be a whole number from -2^31 to 2^31-1" {
		t.Errorf("ParseInt(2^31, 32): %v, want the range", err)
	}
}

func TestParseFloat(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want float64
	}{
		{"0.5", 0.5}, {"010", 10}, {"010.5", 10.5}, {"1e3", 1000}, {"-2", -2}, {".25", 0.25},
	} {
		if got, err := ParseFloat(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseFloat(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"inf", "+Inf", "-inf", "infinity", "NaN", "nan", "0x1p4", "0x10", "1e400", "-1e400", "1_000", "", "one"} {
		if got, err := ParseFloat(in); !errors.Is(err, ErrNotFinite) {
			t.Errorf("ParseFloat(%q) = %v, %v; want refused", in, got, err)
		}
	}
}
