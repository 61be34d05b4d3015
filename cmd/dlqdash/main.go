// Command dlqdash is a web dashboard for triaging and replaying Azure
// Service Bus dead-lettered messages, with its own Service Bus emulator for
// the demo. Run 'dlqdash -h' for its commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// The first SIGINT or SIGTERM starts a graceful shutdown; once ctx is
	// done, stop restores the default handling so a second signal kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
