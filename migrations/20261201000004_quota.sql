-- Quota as a system of record: flavors made of node pools, each team's Kueue identity, quota
-- requests with their life cycle (shared::quota), and an append-only audit log.

create function dns_label(text) returns text language sql immutable as $$
    select nullif(trim(both '-' from left(regexp_replace(lower($1), '[^a-z0-9]+', '-', 'g'), 63)), '')
$$;

create table flavors (
    id bigint generated always as identity primary key,
    name text not null unique check (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    gpu_model_id bigint not null references gpu_models (id) on delete restrict,
    -- shared::quota::FlavorSettings: node labels, taints, tolerations, MIG layout per GPU
    settings jsonb not null default '{}' check (jsonb_typeof(settings) = 'object'),
    version integer not null default 1 check (version >= 1),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    -- lets node_pools refer to (flavor, model): a flavor's pools all hold its model
    unique (id, gpu_model_id)
);

create trigger flavors_updated_at before update on flavors
    for each row execute function set_updated_at();

comment on table flavors is
    'Kueue ResourceFlavors: node pools of one GPU model that quota is granted on; capacity is their GPUs.';

alter table node_pools add column flavor_id bigint;

-- A pool inserted without a flavor gets its own, named after it (one flavor per pool); admins
-- may group pools of one model under one flavor instead.
create function node_pool_default_flavor() returns trigger language plpgsql as $$
declare
    wanted text := coalesce(dns_label(new.name), 'pool-' || new.id);
begin
    if new.flavor_id is null then
        if exists (select 1 from flavors where name = wanted and gpu_model_id <> new.gpu_model_id) then
            wanted := left(wanted, 50) || '-' || new.id;
        end if;
        insert into flavors (name, gpu_model_id) values (wanted, new.gpu_model_id)
            on conflict (name) do nothing;
        select id into new.flavor_id from flavors where name = wanted;
    end if;
    return new;
end;
$$;

create trigger node_pools_default_flavor before insert on node_pools
    for each row execute function node_pool_default_flavor();

-- Pools that exist already get their flavor the same way.
do $$
declare
    pool record;
    wanted text;
begin
    for pool in select id, name, gpu_model_id from node_pools order by id loop
        wanted := coalesce(dns_label(pool.name), 'pool-' || pool.id);
        if exists (select 1 from flavors where name = wanted and gpu_model_id <> pool.gpu_model_id) then
            wanted := left(wanted, 50) || '-' || pool.id;
        end if;
        insert into flavors (name, gpu_model_id) values (wanted, pool.gpu_model_id)
            on conflict (name) do nothing;
        update node_pools set flavor_id = (select id from flavors where name = wanted)
            where id = pool.id;
    end loop;
end;
$$;

alter table node_pools
    alter column flavor_id set not null,
    -- a flavor moved to another model takes its pools along (inventory import)
    add foreign key (flavor_id, gpu_model_id) references flavors (id, gpu_model_id)
        on update cascade on delete restrict;

create index node_pools_flavor_id on node_pools (flavor_id);

-- Each team's Kueue identity: ClusterQueue, LocalQueue (in the team's namespace) and cohort,
-- defaulting from the team's name; admins set the names an existing cluster already uses.
alter table teams
    add column cluster_queue text check (cluster_queue ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    add column local_queue text check (local_queue ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    -- null: the team's queue is in no cohort (its quota is hard)
    add column cohort text default 'gpufleet' check (cohort ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$');

update teams set cluster_queue = name, local_queue = name;

create function team_default_queues() returns trigger language plpgsql as $$
begin
    new.cluster_queue := coalesce(new.cluster_queue, new.name);
    new.local_queue := coalesce(new.local_queue, new.name);
    return new;
end;
$$;

create trigger teams_default_queues before insert on teams
    for each row execute function team_default_queues();

alter table teams
    alter column cluster_queue set not null,
    alter column local_queue set not null,
    add constraint teams_cluster_queue_unique unique (cluster_queue);

-- Quota requests. The spec (shared::quota::QuotaSpec) is JSON; the state machine is
-- shared::quota::State::after, and the database keeps its facts true on its own.
create sequence quota_approval_order;

create table quota_requests (
    id bigint generated always as identity primary key,
    team_id bigint not null references teams (id) on delete restrict,
    state text not null default 'draft'
        check (state in ('draft', 'submitted', 'approved', 'rejected', 'superseded', 'revoked')),
    version integer not null default 1 check (version >= 1),
    spec jsonb not null check (jsonb_typeof(spec) = 'object'),
    created_by bigint not null references users (id),
    submitted_by bigint references users (id),
    submitted_at timestamptz,
    decided_by bigint references users (id),
    decided_at timestamptz,
    comment text check (length(comment) <= 2000),
    -- set when approved: a later approval has a larger one
    approval_order bigint unique,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    check ((state in ('approved', 'superseded', 'revoked')) = (approval_order is not null)),
    check (state = 'draft' or submitted_by is not null),
    -- four eyes: whoever wrote or submitted a request never approves it
    check (approval_order is null or (decided_by <> created_by and decided_by <> submitted_by))
);

create index quota_requests_by_team on quota_requests (team_id, id desc);
create index quota_requests_by_state on quota_requests (state, id desc);

create trigger quota_requests_updated_at before update on quota_requests
    for each row execute function set_updated_at();

comment on table quota_requests is 'GPU quota requests: /api/quota; a team''s effective quota is its latest approval in force';

-- Who did what, when, with the object before and after. Nothing may rewrite it.
create table audit_log (
    id bigint generated always as identity primary key,
    at timestamptz not null default now(),
    -- null: the console itself (e.g. a later approval superseding an earlier one)
    actor_id bigint references users (id),
    actor text not null,
    kind text not null check (kind in ('quota_request', 'flavor', 'team_queue', 'inventory')),
    action text not null check (action <> ''),
    subject text not null check (subject <> ''),
    -- the team it concerns, when one does
    team text,
    before jsonb,
    after jsonb
);

create index audit_log_by_time on audit_log (at desc, id desc);
create index audit_log_by_team on audit_log (team, id desc);

create trigger audit_log_append_only before update or delete on audit_log
    for each row execute function forbid_update();
create trigger audit_log_no_truncate before truncate on audit_log
    for each statement execute function forbid_update();

comment on table audit_log is 'append-only: every quota request transition and every change to flavors, team queues and the inventory';
