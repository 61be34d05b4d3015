package main

import (
	"cmp"
	"strings"

	"github.com/dlqdash/dlqdash/emulator"
)

func emulatorFlags(f *flagSet) {
	f.str("amqp-addr", envEmulatorAMQPAddr, defaultEmulatorAMQP, "address the emulator's AMQP 1.0 endpoint listens on")
	f.str("admin-addr", envEmulatorAdmin, defaultEmulatorAdm, "address the emulator's admin HTTP endpoint listens on")
	f.str("config", envEmulatorConfig, "", "entities to create, in the Microsoft Service Bus emulator's Config.json format")
	logFlags(f)
}

// parseEmulatorConfig reads the emulator's flags, and its SAS key from the
// environment.
func parseEmulatorConfig(cfg *Config, f *flagSet, getenv func(string) string, bad func(string, ...any) error) error {
	var err error
	if cfg.Emulator.AMQPAddr, err = f.addr("amqp-addr", bad); err != nil {
		return err
	}
	if cfg.Emulator.AdminAddr, err = f.addr("admin-addr", bad); err != nil {
		return err
	}
	cfg.Emulator.ConfigPath = f.get("config")
	cfg.Emulator.KeyName = cmp.Or(strings.TrimSpace(getenv(envEmulatorKeyName)), emulator.DefaultKeyName)
	cfg.Emulator.Key = secret(cmp.Or(getenv(envEmulatorKey), emulator.DefaultKey))
	return nil
}
