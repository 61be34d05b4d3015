package isodur

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Infinite is the duration that stands for .NET's TimeSpan.MaxValue.
const Infinite time.Duration = math.MaxInt64

// InfiniteText is how the service writes TimeSpan.MaxValue.
const InfiniteText = "P10675199DT2H48M5.4775807S"

// ErrSyntax is wrapped by every error Parse returns.
var ErrSyntax = errors.New("invalid ISO-8601 duration")

const day = 24 * time.Hour

// Parse reads an ISO-8601 duration such as "PT1M", "P14D", "P1DT2H30M5.25S" or
// "-PT5S". Values too large for time.Duration saturate to Infinite.
func Parse(s string) (time.Duration, error) {
	d, err := parse(s)
	if err != nil {
		return 0, fmt.Errorf("%w %q: %s", ErrSyntax, s, err.Error())
	}
	return d, nil
}

// MustParse is Parse for constants known to be valid; it panics otherwise.
func MustParse(s string) time.Duration {
	d, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return d
}

// parse returns plain errors; Parse adds the input and ErrSyntax.
func parse(s string) (time.Duration, error) {
	in := s
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	if !strings.HasPrefix(s, "P") {
		return 0, errors.New(`must start with "P"`)
	}
	s = s[1:]
	if s == "" {
		return 0, errors.New("no components")
	}

	// total is kept in uint64 nanoseconds; anything above MaxInt64 saturates.
	var total uint64
	saturated := false
	add := func(n uint64, unit time.Duration) {
		if saturated {
			return
		}
		if n != 0 && n > uint64(math.MaxInt64)/uint64(unit) {
			saturated = true
			return
		}
		v := n * uint64(unit)
		if total > uint64(math.MaxInt64)-v {
			saturated = true
			return
		}
		total += v
	}

	inTime := false
	seen := 0 // components seen in the current part
	order := "YMWD"
	for s != "" {
		if s[0] == 'T' {
			if inTime {
				return 0, errors.New(`"T" appears twice`)
			}
			inTime, order, seen = true, "HMS", 0
			s = s[1:]
			if s == "" {
				return 0, errors.New(`"T" must be followed by hours, minutes or seconds`)
			}
			continue
		}
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("expected a number at %q", s)
		}
		intPart := s[:i]
		frac := ""
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i+1 {
				return 0, fmt.Errorf("expected digits after the decimal point in %q", s)
			}
			frac = s[i+1 : j]
			i = j
		}
		if i >= len(s) {
			return 0, fmt.Errorf("number %q has no designator", s)
		}
		des := s[i]
		s = s[i+1:]
		k := strings.IndexByte(order, des)
		if k < 0 {
			if inTime {
				return 0, fmt.Errorf("unexpected designator %q in the time part (want H, M or S, in that order)", des)
			}
			return 0, fmt.Errorf("unexpected designator %q in the date part (want Y, M, W or D, in that order; time after T)", des)
		}
		order = order[k+1:]
		seen++
		if frac != "" && !(inTime && des == 'S') {
			return 0, fmt.Errorf("a fraction is only allowed on seconds")
		}
		n, err := strconv.ParseUint(intPart, 10, 64)
		if err != nil { // only overflow is possible here: digits were checked
			saturated = true
			continue
		}
		var unit time.Duration
		switch {
		case !inTime && des == 'Y':
			unit = 365 * day
		case !inTime && des == 'M':
			unit = 30 * day
		case !inTime && des == 'W':
			unit = 7 * day
		case !inTime && des == 'D':
			unit = day
		case des == 'H':
			unit = time.Hour
		case des == 'M':
			unit = time.Minute
		default:
			unit = time.Second
		}
		add(n, unit)
		if frac != "" {
			if len(frac) > 9 {
				frac = frac[:9]
			}
			ns, _ := strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
			add(ns, time.Nanosecond)
		}
	}
	if inTime && seen == 0 {
		return 0, fmt.Errorf("%q has an empty time part", in)
	}
	if saturated || total >= uint64(math.MaxInt64) {
		if neg {
			return -Infinite, nil
		}
		return Infinite, nil
	}
	d := time.Duration(total)
	if neg {
		d = -d
	}
	return d, nil
}

// Format writes d the way Service Bus does: "PT1M", "P14D", "P1DT2H",
// "PT0.5S", "PT0S" for zero and InfiniteText for Infinite. Precision is
// truncated to 100 ns.
func Format(d time.Duration) string {
	if d == Infinite {
		return InfiniteText
	}
	if d < 0 {
		if d == math.MinInt64 {
			return "-" + InfiniteText
		}
		return "-" + Format(-d)
	}
	d = d.Truncate(100 * time.Nanosecond)
	if d == 0 {
		return "PT0S"
	}
	var b strings.Builder
	b.WriteByte('P')
	if days := d / day; days > 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10))
		b.WriteByte('D')
		d -= days * day
	}
	if d == 0 {
		return b.String()
	}
	b.WriteByte('T')
	if h := d / time.Hour; h > 0 {
		b.WriteString(strconv.FormatInt(int64(h), 10))
		b.WriteByte('H')
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		b.WriteString(strconv.FormatInt(int64(m), 10))
		b.WriteByte('M')
		d -= m * time.Minute
	}
	if d > 0 {
		sec := d / time.Second
		b.WriteString(strconv.FormatInt(int64(sec), 10))
		if ns := d - sec*time.Second; ns > 0 {
			f := fmt.Sprintf("%09d", int64(ns))
			b.WriteByte('.')
			b.WriteString(strings.TrimRight(f, "0"))
		}
		b.WriteByte('S')
	}
	return b.String()
}
