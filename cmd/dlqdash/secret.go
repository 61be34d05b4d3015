package main

import "log/slog"

// secret holds a credential. Every way of printing it prints a placeholder,
// so a stray %v or slog attribute cannot leak it.
type secret string

const redacted = "[REDACTED]"

func (s secret) String() string               { return redacted }
func (s secret) GoString() string             { return redacted }
func (s secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
