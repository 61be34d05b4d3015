package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

const healthcheckTimeout = 5 * time.Second

// runHealthcheck GETs cfg.HealthcheckURL and succeeds on 200. Container
// images without curl (distroless) use it as their HEALTHCHECK.
func runHealthcheck(ctx context.Context, cfg Config, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.HealthcheckURL, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", cfg.HealthcheckURL, res.Status)
	}
	fmt.Fprintf(stdout, "healthy: %s answered %s\n", cfg.HealthcheckURL, res.Status)
	return nil
}
