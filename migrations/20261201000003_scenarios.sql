-- Saved planning scenarios: the scenario JSON as the console sent it, with its schema version
-- (older versions are migrated when read, by shared::saved::read_stored).

create table scenarios (
    id bigint generated always as identity primary key,
    name text not null check (length(btrim(name)) between 1 and 100),
    owner_id bigint not null references users (id),
    schema_version integer not null check (schema_version >= 1),
    body jsonb not null check (jsonb_typeof(body) = 'object'),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create index scenarios_by_update on scenarios (updated_at desc, id desc);

create trigger scenarios_updated_at before update on scenarios
    for each row execute function set_updated_at();

comment on table scenarios is 'planning scenarios saved from the console: /api/scenarios';
comment on column scenarios.schema_version is 'the scenario format version of body (shared::scenario::SCENARIO_VERSION when saved)';
