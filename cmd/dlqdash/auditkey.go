package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/store"
)

// The audit key (docs/api.md, "Audit"): every audit entry is an HMAC-SHA256
// link under a key that is not in the database, so that whoever holds the
// database file alone cannot rewrite the trail and rehash it.

const envAuditKey = "DLQDASH_AUDIT_KEY"

// auditHeadEvery is how often serve logs the audit head, so that shipped
// logs anchor the chain outside the database.
const auditHeadEvery = time.Hour

// auditKeyFlag adds --audit-key-file (the key itself may come from
// DLQDASH_AUDIT_KEY instead).
func auditKeyFlag(f *flagSet) {
	f.str("audit-key-file", "", "", "file holding the audit key (the key itself may be in "+envAuditKey+" instead); "+
		"if neither is given, the file <db>.audit-key, which serve creates (mode 0600) on first start")
}

// defaultAuditKeyPath is where the key lives when none is given: beside the
// database.
func defaultAuditKeyPath(db string) string { return db + ".audit-key" }

// loadAuditKey finds the audit key: --audit-key-file or DLQDASH_AUDIT_KEY
// (parseConfig refuses both), else the file beside the database, which it creates
// with a random key when create is set. It returns nil (no error) when there
// is none and create is not set, and says where the key came from.
func loadAuditKey(cfg Config, create bool) (key []byte, from string, created bool, err error) {
	check := func(b []byte, from string) ([]byte, string, bool, error) {
		b = []byte(strings.TrimSpace(string(b)))
		if len(b) < audit.MinKeyLen {
			return nil, from, false, fmt.Errorf("audit key from %s is %d bytes: want at least %d (a new random key: openssl rand -hex 32)", from, len(b), audit.MinKeyLen)
		}
		return b, from, false, nil
	}
	switch {
	case cfg.AuditKeyFile != "":
		b, err := os.ReadFile(cfg.AuditKeyFile)
		if err != nil {
			return nil, cfg.AuditKeyFile, false, fmt.Errorf("read the audit key (--audit-key-file): %w", err)
		}
		return check(b, cfg.AuditKeyFile)
	case cfg.AuditKey != "":
		return check([]byte(cfg.AuditKey), envAuditKey)
	}
	if store.IsPostgresURL(cfg.DB) {
		// No file beside a database server: every replica must be given
		// the same key.
		if !create {
			return nil, "", false, nil
		}
		return nil, "", false, fmt.Errorf("with a PostgreSQL database the audit key must be given, the same to every replica: --audit-key-file or %s", envAuditKey)
	}
	path := defaultAuditKeyPath(cfg.DB)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return check(b, path)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, path, false, fmt.Errorf("read the audit key: %w", err)
	case !create:
		return nil, "", false, nil
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, path, false, fmt.Errorf("make an audit key: %w", err)
	}
	b = []byte(hex.EncodeToString(raw))
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, path, false, fmt.Errorf("create the audit key file (or give --audit-key-file or %s): %w", envAuditKey, err)
	}
	_, werr := fh.Write(append(b, '\n'))
	if cerr := fh.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, path, false, fmt.Errorf("write the audit key file: %w", werr)
	}
	return b, path, true, nil
}

// openAuditLog is the keyed audit trail of a command that writes to st: it
// loads (or creates) the key, reports a key it created through created, and
// records the switch to a keyed chain if the chain does not hold it yet. A
// chain kept under another key stops it.
func openAuditLog(ctx context.Context, cfg Config, st audit.Store, created func(path string)) (*audit.Log, error) {
	key, from, made, err := loadAuditKey(cfg, true)
	if err != nil {
		return nil, err
	}
	if made && created != nil {
		created(from)
	}
	l, err := audit.NewKeyed(st, key)
	if err != nil {
		return nil, fmt.Errorf("audit key from %s: %w", from, err)
	}
	if err := l.CheckKey(ctx); err != nil {
		return nil, fmt.Errorf("audit key from %s: %w", from, err)
	}
	return l, nil
}

// logAuditKeyCreated is the one log line of a key serve created.
func logAuditKeyCreated(logger *slog.Logger) func(string) {
	return func(path string) {
		logger.Warn("audit key created: audit verify needs it; keep a copy away from the database", "file", path)
	}
}

// auditHead is the newest entry's seq and hash ("0" and GenesisHash for an
// empty chain).
func auditHead(ctx context.Context, st *store.Store) (audit.Head, error) {
	es, _, err := st.ListAudit(ctx, audit.Filter{}, 1, "")
	if err != nil {
		return audit.Head{}, err
	}
	if len(es) == 0 {
		return audit.Head{Hash: audit.GenesisHash}, nil
	}
	return audit.Head{Seq: es[0].Seq, Hash: es[0].Hash}, nil
}

// logAuditHeads logs the audit head now and every period until ctx ends:
// shipped logs then hold a head to check the database against
// (audit verify --expect-head).
func logAuditHeads(st *store.Store, logger *slog.Logger, period time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			if h, err := auditHead(ctx, st); err != nil {
				if ctx.Err() == nil {
					logger.Warn("audit head unreadable", "error", err)
				}
			} else {
				logger.Info("audit head", "seq", h.Seq, "hash", h.Hash)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}
