-- 0018_oidc_signins (PostgreSQL twin of ../0018_oidc_signins.sql): OpenID
-- Connect sign-ins in progress, shared by every replica (see the SQLite
-- file for what a row holds: no secret).
CREATE TABLE oidc_signins (
    state_hash  text   COLLATE "C" PRIMARY KEY,
    client      text   COLLATE "C" NOT NULL,
    next        text   NOT NULL DEFAULT '/',
    created_at  bigint NOT NULL,
    expires_at  bigint NOT NULL
);

CREATE INDEX oidc_signins_expiry ON oidc_signins (expires_at);
CREATE INDEX oidc_signins_client ON oidc_signins (client, created_at);
