package main

import "net/url"

func healthcheckFlags(f *flagSet) {
	f.str("url", envHealthcheckURL, "", "health URL to GET (default: /healthz on "+envAddr+", or "+defaultAddr+")")
}

// parseHealthcheckConfig reads healthcheck's URL, by default /healthz on
// the address the dashboard is configured to listen on.
func parseHealthcheckConfig(cfg *Config, f *flagSet, getenv func(string) string, bad func(string, ...any) error) error {
	u := f.get("url")
	if u == "" {
		addr := getenv(envAddr)
		if addr == "" {
			addr = defaultAddr
		}
		if err := validateAddr(addr); err != nil {
			return bad("invalid address %q from %s: %v", addr, envAddr, err)
		}
		u = healthURL(addr)
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return bad("invalid URL %q from %s: want http://host:port/healthz", u, f.source("url"))
	}
	cfg.HealthcheckURL = u
	return nil
}
