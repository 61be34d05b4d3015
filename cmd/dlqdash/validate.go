package main

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"time"
)

// parseRetention reads a retention: a Go duration, or a whole number of
// days ("30d"); "0" keeps messages forever.
func parseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 36500 {
			return 0, errors.New("want a number of days such as 30d, a duration such as 72h, or 0 to keep forever")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Minute {
		return 0, errors.New("want a number of days such as 30d, a duration of at least 1m such as 72h, or 0 to keep forever")
	}
	return d, nil
}

// validateAddr accepts host:port with a numeric port (0 means any free port)
// and an optional host (":8080" listens on every interface).
func validateAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("want host:port, e.g. 127.0.0.1:8080 or :8080")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return errors.New("port must be a number from 0 to 65535")
	}
	if strings.ContainsAny(host, " /") {
		return errors.New("want host:port, e.g. 127.0.0.1:8080 or :8080")
	}
	return nil
}

// healthURL is the /healthz URL of a dashboard listening on addr, reached
// from the same machine.
func healthURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}
