package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
)

// envReplicaID names this replica among those sharing one database.
const envReplicaID = "DLQDASH_REPLICA_ID"

// maxReplicaIDLen bounds --replica-id: it is a label value of every metric
// and a column of the lease and job rows.
const maxReplicaIDLen = 128

func replicaFlag(f *flagSet) {
	f.str("replica-id", envReplicaID, "", "this replica's name among the replicas sharing one database (letters, digits and . _ - :, at most 128); default the host name and a random suffix, new at each start")
}

// parseReplicaID reads --replica-id, or makes one up: the host name (a
// pod's name in Kubernetes) and six random hex digits, so that two
// processes on one host, or a restarted one, never share an id.
func parseReplicaID(f *flagSet, bad func(string, ...any) error) (string, error) {
	id := strings.TrimSpace(f.get("replica-id"))
	if id == "" {
		return defaultReplicaID(os.Hostname), nil
	}
	if !validReplicaID(id) {
		return "", bad("invalid replica id %q from %s: use at most %d letters, digits, dots, underscores, dashes and colons", id, f.source("replica-id"), maxReplicaIDLen)
	}
	return id, nil
}

func defaultReplicaID(hostname func() (string, error)) string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	host, err := hostname()
	host = sanitizeReplicaID(host)
	if err != nil || host == "" {
		host = "dlqdash"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

func replicaIDByte(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-:", c)
}

func validReplicaID(id string) bool {
	if id == "" || len(id) > maxReplicaIDLen {
		return false
	}
	for _, c := range id {
		if !replicaIDByte(c) {
			return false
		}
	}
	return true
}

// sanitizeReplicaID keeps the allowed characters of a host name, leaving
// room for the suffix.
func sanitizeReplicaID(host string) string {
	var b strings.Builder
	for _, c := range host {
		if replicaIDByte(c) {
			b.WriteRune(c)
		}
	}
	s := b.String()
	if len(s) > maxReplicaIDLen-7 {
		s = s[:maxReplicaIDLen-7]
	}
	return s
}
