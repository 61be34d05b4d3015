package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// TokenPrefix starts every API token, so that secret scanners and people
// can tell one when they see it.
const TokenPrefix = "dlq_"

// newSecret is 32 random bytes as unpadded base64url (43 characters).
func newSecret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// hashSecret is the hex SHA-256 of a token or session id: what the
// database keeps. A plain hash suffices: the secrets are 256 random bits,
// nothing to guess or precompute.
func hashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// NewToken returns a new API token's secret and its hash.
func NewToken() (secret, hash string) {
	secret = TokenPrefix + newSecret()
	return secret, hashSecret(secret)
}

// HashToken is the hash of a presented token, as Store.TokenByHash wants
// it. Anything that does not look like a token hashes to something no
// token has.
func HashToken(secret string) string { return hashSecret(strings.TrimSpace(secret)) }

// validTokenName: 1 to 64 of letters, digits, '.', '_' and '-'.
func validTokenName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
