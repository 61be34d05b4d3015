package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad command line or configuration; nothing was started
)

// run is the whole program, minus process globals: it parses the command
// line, then hands the Config to the command's run function.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv)
	if err == nil && cfg.ConfigFile != "" {
		// Still a configuration error (exit 2): nothing has started.
		err = loadConfigFile(&cfg, getenv, os.ReadFile)
	}
	var help *helpRequest
	switch {
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.text)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "dlqdash: %v\n", err)
		return exitUsage
	}

	logger := newLogger(cfg, stderr)
	switch cfg.Command {
	case "demo":
		err = runDemo(ctx, cfg, logger)
	case "serve":
		err = runServe(ctx, cfg, logger)
	case "emulator":
		err = runEmulator(ctx, cfg, logger, stdout)
	case "healthcheck":
		err = runHealthcheck(ctx, cfg, stdout)
	case "export":
		err = runExport(ctx, cfg, stdout)
	case "audit verify":
		err = runAuditVerify(ctx, cfg, stdout)
	case "audit export":
		err = runAuditExport(ctx, cfg, stdout)
	case "audit head":
		err = runAuditHead(ctx, cfg, stdout)
	case "token create":
		err = runTokenCreate(ctx, cfg, stdout)
	case "token list":
		err = runTokenList(ctx, cfg, stdout)
	case "token revoke":
		err = runTokenRevoke(ctx, cfg, stdout)
	case "store copy":
		err = runStoreCopy(ctx, cfg, stdout)
	default:
		err = fmt.Errorf("command %q has no implementation", cfg.Command)
	}
	var reported *reportedError
	if errors.As(err, &reported) {
		return exitFailure // already said on stdout
	}
	if err != nil {
		// The one report of a failure: a single plain line.
		fmt.Fprintf(stderr, "dlqdash: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
