-- The latest admission of each recorded Workload beside its first: Kueue's Admitted condition
-- moves to the re-admission, and a Workload evicted and admitted again works its last run from
-- there. The replay (shared::planning::replay) takes a recorded job's work from it, and its
-- time held from the first admission to the first eviction plus the last run, not the time it
-- spent evicted in between.

alter table workload_history add column last_admitted_at timestamptz;

update workload_history set last_admitted_at = admitted_at;

comment on column workload_history.last_admitted_at is
    'the latest time the Admitted condition was seen True (its lastTransitionTime); admitted_at is the first';
