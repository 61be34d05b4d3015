-- 0018_oidc_signins: OpenID Connect sign-ins in progress (package
-- auth/oidc), kept in the database so that the callback may reach any
-- replica, not only the one that sent the browser to the provider (issue
-- 20).
--
-- A row holds no secret: state_hash is the hex SHA-256 of the sign-in's
-- state, which the provider sends back in the callback. The state, nonce
-- and PKCE verifier are derived from a random key that exists only in the
-- browser's login cookie, so whoever reads this table can neither finish
-- a sign-in nor tell its verifier. A callback deletes its row (DELETE ...
-- RETURNING): a sign-in finishes once, on whichever replica. client is
-- the address the sign-in started from (an IPv6 address's /64), which
-- bounds the rows one address can hold; expires_at (Unix ms UTC) is when
-- the sign-in lapses, and every new sign-in sweeps the lapsed rows.
CREATE TABLE oidc_signins (
    state_hash  TEXT    PRIMARY KEY,
    client      TEXT    NOT NULL,
    next        TEXT    NOT NULL DEFAULT '/',
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX oidc_signins_expiry ON oidc_signins (expires_at);
CREATE INDEX oidc_signins_client ON oidc_signins (client, created_at);
