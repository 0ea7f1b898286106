-- Accounts: users with roles, teams with members, server-side sessions, failed log-ins.

create table users (
    id bigint generated always as identity primary key,
    -- lower-case, so "Alice" and "alice" are one account
    username text not null unique check (username ~ '^[a-z0-9][a-z0-9._@-]{0,63}$'),
    display_name text not null default '' check (length(display_name) <= 200),
    -- argon2id PHC string; null for users who only ever come through the auth proxy
    password_hash text check (password_hash like '$argon2id$%'),
    disabled boolean not null default false,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create trigger users_updated_at before update on users
    for each row execute function set_updated_at();

create table user_roles (
    user_id bigint not null references users (id) on delete cascade,
    role text not null check (role in ('requester', 'approver', 'finance', 'admin')),
    created_at timestamptz not null default now(),
    primary key (user_id, role)
);

create table teams (
    id bigint generated always as identity primary key,
    name text not null unique check (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    -- the team's Kubernetes namespace (a DNS-1123 label)
    namespace text not null unique check (namespace ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    cost_centre text not null check (cost_centre <> '' and length(cost_centre) <= 64),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create trigger teams_updated_at before update on teams
    for each row execute function set_updated_at();

create table team_members (
    team_id bigint not null references teams (id) on delete cascade,
    user_id bigint not null references users (id) on delete cascade,
    created_at timestamptz not null default now(),
    primary key (team_id, user_id)
);

create index team_members_user_id on team_members (user_id);

-- One row per user with roles and teams as sorted arrays: what access checks and admin lists read.
create view user_profiles as
select u.id as user_id, u.username, u.display_name, u.disabled,
       array(select r.role from user_roles r where r.user_id = u.id order by r.role) as roles,
       array(select t.name from team_members m join teams t on t.id = m.team_id
             where m.user_id = u.id order by t.name) as teams
from users u;

create table sessions (
    -- sha-256 of the cookie's token: a stolen table does not yield usable cookies
    token_sha256 bytea primary key check (length(token_sha256) = 32),
    user_id bigint not null references users (id) on delete cascade,
    csrf_token text not null check (length(csrf_token) = 64),
    created_at timestamptz not null default now(),
    last_seen_at timestamptz not null default now(),
    -- the absolute expiry; the idle expiry is last_seen_at + the configured idle time
    expires_at timestamptz not null,
    updated_at timestamptz not null default now()
);

create index sessions_user_id on sessions (user_id);
create index sessions_expires_at on sessions (expires_at);

create trigger sessions_updated_at before update on sessions
    for each row execute function set_updated_at();

-- Append-only: one row per failed log-in, for throttling by account and by address.
create table login_failures (
    id bigint generated always as identity primary key,
    username text not null,
    address text not null,
    created_at timestamptz not null default now()
);

create index login_failures_username on login_failures (username, created_at);
create index login_failures_address on login_failures (address, created_at);

create function forbid_update() returns trigger language plpgsql as $$
begin
    raise exception '% is append-only', tg_table_name;
end;
$$;

create trigger login_failures_append_only before update on login_failures
    for each row execute function forbid_update();
