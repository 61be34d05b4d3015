package isodur

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"PT1M", time.Minute},
		{"PT30S", 30 * time.Second},
		{"P14D", 14 * 24 * time.Hour},
		{"PT10M", 10 * time.Minute},
		{"PT1H", time.Hour},
		{"PT20S", 20 * time.Second},
		{"P1DT2H3M4.5S", 26*time.Hour + 3*time.Minute + 4500*time.Millisecond},
		{"PT0.0000001S", 100 * time.Nanosecond},
		{"PT1.123456789123S", time.Second + 123456789},
		{"PT0S", 0},
		{"P0D", 0},
		{"P1W", 7 * 24 * time.Hour},
		{"P1Y", 365 * 24 * time.Hour},
		{"P1M", 30 * 24 * time.Hour},
		{"P1MT1M", 30*24*time.Hour + time.Minute},
		{"-PT5S", -5 * time.Second},
		{"PT90M", 90 * time.Minute},
		{"PT1,5S", 1500 * time.Millisecond},
		{InfiniteText, Infinite},
		{"P106751D", 106751 * 24 * time.Hour},
		{"P106752D", Infinite},
		{"P99999999999999999999999D", Infinite},
		{"-" + InfiniteText, -Infinite},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"", "P", "PT", "1M", "pt1m", "PT1", "PTM", "P1H", "PT1D", "PT1S1M", "P1D1Y", "P1.5D",
		"PT1.S", "P1DT", "PT1MT1S", "P-1D", "PT1M ", " PT1M", "PT1X",
	} {
		d, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, d)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error %v does not wrap ErrSyntax", in, err)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "PT0S"},
		{time.Minute, "PT1M"},
		{30 * time.Second, "PT30S"},
		{14 * 24 * time.Hour, "P14D"},
		{26*time.Hour + 3*time.Minute + 4500*time.Millisecond, "P1DT2H3M4.5S"},
		{time.Hour, "PT1H"},
		{100 * time.Nanosecond, "PT0.0000001S"},
		{150 * time.Nanosecond, "PT0.0000001S"},
		{-5 * time.Second, "-PT5S"},
		{Infinite, InfiniteText},
		{-Infinite, "-" + InfiniteText},
		{time.Duration(-1 << 63), "-" + InfiniteText},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{1, 999, time.Second, 61 * time.Second, 1234567891234567800, Infinite - 1000} {
		d = d.Truncate(100)
		got, err := Parse(Format(d))
		if err != nil || got != d {
			t.Errorf("Parse(Format(%d)) = %d, %v", d, got, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"PT1M", InfiniteText, "P1Y2M3W4DT5H6M7.8S", "-PT0S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d == Infinite || d == -Infinite {
			return
		}
		back, err := Parse(Format(d))
		if err != nil || back != d.Truncate(100) {
			t.Fatalf("%q → %d → %q → %d, %v", s, d, Format(d), back, err)
		}
	})
}
