package main

import (
	"context"
	"errors"
	"log/slog"
)

var errEmulatorUnavailable = errors.New("the emulator is not available in this build yet")

// runEmulator runs `dlqdash emulator`: the Service Bus emulator alone, AMQP
// on cfg.Emulator.AMQPAddr, admin HTTP on cfg.Emulator.AdminAddr, entities
// from cfg.Emulator.ConfigPath.
//
// This is the function to replace when servicebus/emulator lands: listen on
// both addresses first (log each real address with the "addr" key), serve
// until ctx ends, then shut down; return an error for run to print.
func runEmulator(ctx context.Context, cfg Config, logger *slog.Logger) error {
	return errEmulatorUnavailable
}
