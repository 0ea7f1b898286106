-- Approved quota on the cluster: what the reconciler last saw of each Kueue object gpufleet
-- writes (or finds there unapproved), its last run, and whether each approved request landed.

create table cluster_objects (
    kind text not null check (kind in ('ResourceFlavor', 'Cohort', 'ClusterQueue', 'LocalQueue', 'WorkloadPriorityClass')),
    -- '' for cluster-scoped kinds
    namespace text not null default '',
    name text not null check (name <> ''),
    -- the team whose queue this is (ClusterQueue, LocalQueue)
    team_id bigint references teams (id) on delete set null,
    -- what gpufleet applies; null for an object nobody approved
    desired jsonb check (desired is null or jsonb_typeof(desired) = 'object'),
    -- the object as the cluster last showed it (server metadata left out); null: absent or unread
    live jsonb check (live is null or jsonb_typeof(live) = 'object'),
    state text not null
        check (state in ('in_sync', 'pending', 'drifted', 'conflict', 'failed', 'unapproved')),
    check ((state = 'unapproved') = (desired is null)),
    -- [{path, live, desired}]: drift, or what a pending apply will change
    changes jsonb not null default '[]' check (jsonb_typeof(changes) = 'array'),
    error text,
    -- ["kubectl-edit: .spec.cohortName", …]
    conflicts jsonb not null default '[]' check (jsonb_typeof(conflicts) = 'array'),
    applied_at timestamptz,
    checked_at timestamptz not null default now(),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (kind, namespace, name)
);

create trigger cluster_objects_updated_at before update on cluster_objects
    for each row execute function set_updated_at();

comment on table cluster_objects is 'Kueue objects as the reconciler last saw them: /api/cluster';

-- One row: the reconciler's last run (any replica's; one at a time by advisory lock).
create table cluster_reconciler (
    id boolean primary key default true check (id),
    last_run_at timestamptz,
    last_ok_at timestamptz,
    last_error text,
    drift_count integer not null default 0 check (drift_count >= 0),
    failed_count integer not null default 0 check (failed_count >= 0),
    pending_count integer not null default 0 check (pending_count >= 0),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

insert into cluster_reconciler (id) values (true);

create trigger cluster_reconciler_updated_at before update on cluster_reconciler
    for each row execute function set_updated_at();

-- Whether an approved request's queue is on the cluster: applied_at once its ClusterQueue and
-- LocalQueue were applied as approved; apply_error while they could not be.
alter table quota_requests
    add column applied_at timestamptz,
    add column apply_error text check (length(apply_error) <= 4000);

alter table audit_log drop constraint audit_log_kind_check;
alter table audit_log add constraint audit_log_kind_check
    check (kind in ('quota_request', 'flavor', 'team_queue', 'inventory', 'cluster_object'));
