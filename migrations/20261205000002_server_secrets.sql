-- Secrets every replica must share (the auth-proxy users' CSRF key): made by the first replica
-- that needs one, read by the others.
create table server_secrets (
    name text primary key,
    value text not null check (length(value) >= 32),
    created_at timestamptz not null default now()
);
