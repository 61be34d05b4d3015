-- 0008_auth: sign-in sessions and API tokens (package auth).
--
-- Neither table holds a secret: id and hash are the hex SHA-256 of a
-- session cookie's value and of an API token, which are 32 random bytes
-- each and exist only in the browser or the client. Times are Unix ms UTC.
--
-- A session keeps the groups the identity provider sent at sign-in (a JSON
-- array): the role is computed from them, with the current mapping, on
-- every request; role is the one earned at sign-in, for listings.
CREATE TABLE sessions (
    id               TEXT    PRIMARY KEY,
    user_name        TEXT    NOT NULL,
    email            TEXT    NOT NULL DEFAULT '',
    groups_json      TEXT    NOT NULL DEFAULT '[]',
    role             TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    last_seen_at     INTEGER NOT NULL,
    idle_expires_at  INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_expiry ON sessions (min(idle_expires_at, expires_at));

-- API tokens. A name is never reused, not even after revocation, so that
-- the audit trail's "token:NAME" always means one token.
CREATE TABLE api_tokens (
    name         TEXT    PRIMARY KEY,
    hash         TEXT    NOT NULL UNIQUE,
    role         TEXT    NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    created_at   INTEGER NOT NULL,
    created_by   TEXT    NOT NULL DEFAULT '',
    expires_at   INTEGER,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;
