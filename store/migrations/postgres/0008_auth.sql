-- 0008_auth (PostgreSQL twin of ../0008_auth.sql): sessions and API tokens.
CREATE TABLE sessions (
    id               text   COLLATE "C" PRIMARY KEY,
    user_name        text   NOT NULL,
    email            text   NOT NULL DEFAULT '',
    groups_json      text   NOT NULL DEFAULT '[]',
    role             text   NOT NULL,
    created_at       bigint NOT NULL,
    last_seen_at     bigint NOT NULL,
    idle_expires_at  bigint NOT NULL,
    expires_at       bigint NOT NULL
);

CREATE INDEX sessions_expiry ON sessions (least(idle_expires_at, expires_at));

CREATE TABLE api_tokens (
    name         text   COLLATE "C" PRIMARY KEY,
    hash         text   NOT NULL UNIQUE,
    role         text   NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    created_at   bigint NOT NULL,
    created_by   text   NOT NULL DEFAULT '',
    expires_at   bigint,
    last_used_at bigint,
    revoked_at   bigint
);
