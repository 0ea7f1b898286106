-- The workload history (shared::cluster::workload): every Kueue Workload the recorder listed
-- on the cluster, one row per uid, kept after Kueue deletes the object (gone_at) so the
-- history the planner learns from loses nothing. The recorder (backend/src/cluster/history.rs)
-- writes by upsert: listing the same object twice changes nothing but last_seen_at.

create table workload_history (
    uid text primary key check (uid <> ''),
    namespace text not null,
    name text not null,
    -- spec.queueName ('' when none: named in problems)
    local_queue text not null,
    -- status.admission.clusterQueue, the last seen (kept after the admission ends)
    cluster_queue text,
    priority integer not null,
    priority_class text,
    -- shared::cluster::workload::PodSet[], as last seen while admitted (flavors known) or, if
    -- never admitted, as last seen
    pod_sets jsonb not null check (jsonb_typeof(pod_sets) = 'array'),
    created_at timestamptz not null,
    -- the first time each condition was seen True
    quota_reserved_at timestamptz,
    admitted_at timestamptz,
    finished_at timestamptz,
    -- Succeeded, Failed, …
    finished_reason text,
    -- the Evicted condition as last seen while True: {at_ms, reason, detail}; null otherwise
    evicted jsonb check (evicted is null or jsonb_typeof(evicted) = 'object'),
    -- status.schedulingStats.evictions: [{reason, underlying_cause, count}], as last seen
    evictions jsonb not null check (jsonb_typeof(evictions) = 'array'),
    -- what the planner cannot read from the object, in words
    problems jsonb not null check (jsonb_typeof(problems) = 'array'),
    first_seen_at timestamptz not null,
    last_seen_at timestamptz not null,
    -- a complete listing no longer held it: Kueue deleted it
    gone_at timestamptz,
    -- the demo's (gpufleet demo), not a cluster's: shown as demo data
    demo boolean not null default false
);

create index workload_history_created on workload_history (created_at);

-- Each eviction the recorder saw (the Evicted condition while True), once: the condition's
-- last transition time is its identity.
create table workload_evictions (
    uid text not null references workload_history (uid) on delete cascade,
    at timestamptz not null,
    -- Preempted, PodsReadyTimeout, …
    reason text not null,
    -- for a preemption, the Preempted condition's reason (InClusterQueue, InCohortReclamation, …)
    detail text,
    primary key (uid, at)
);

-- The recorder's last listing: when it completed and what it held, or why it failed.
create table workload_recorder (
    singleton boolean primary key default true check (singleton),
    listed_at timestamptz,
    listed integer check (listed >= 0),
    last_error text,
    last_error_at timestamptz
);
insert into workload_recorder default values;
