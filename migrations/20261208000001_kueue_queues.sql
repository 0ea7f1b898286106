-- Kueue's queue metrics per ClusterQueue and minute (shared::usage::queues), written by the
-- Kueue ingest with the allocation: admission waits (kueue_admission_wait_time_seconds),
-- pending Workloads (kueue_pending_workloads) and evictions by reason
-- (kueue_evicted_workloads_total). Partitioned by UTC month and dropped by retention like the
-- other minute tables.

create table usage_queue_minutes (
    minute timestamptz not null check (date_trunc('minute', minute) = minute),
    cluster_queue text not null,
    -- the histogram's finite bucket bounds (le) in microseconds, ascending, and each bucket's
    -- increase in the minute (cumulative, as Prometheus's buckets are); the +Inf bucket's
    -- increase (every admission; null when no +Inf series was seen)
    wait_le_microseconds bigint[] not null,
    wait_counts bigint[] not null
        check (cardinality(wait_counts) = cardinality(wait_le_microseconds)),
    wait_observations bigint check (wait_observations >= 0),
    -- active + inadmissible at the minute's last samples; null when none
    pending_workloads bigint check (pending_workloads >= 0),
    -- {reason: evictions in the minute}
    evicted jsonb not null check (jsonb_typeof(evicted) = 'object'),
    primary key (minute, cluster_queue)
) partition by range (minute);

create or replace function usage_minute_tables() returns text[] language sql immutable as $$
    select array['usage_minutes', 'usage_token_minutes', 'usage_latency_minutes',
                 'usage_pod_minutes', 'usage_queue_minutes']
$$;

-- The months already partitioned for the other minute tables get this table's partitions too.
do $$
declare
    part record;
begin
    for part in
        select right(c.relname, 7) as month
        from pg_inherits i
        join pg_class c on c.oid = i.inhrelid
        join pg_class p on p.oid = i.inhparent
        where p.relname = 'usage_minutes'
    loop
        perform usage_ensure_partitions(
            to_date(part.month, 'YYYY_MM')::timestamp at time zone 'UTC',
            (to_date(part.month, 'YYYY_MM')::timestamp + interval '1 month') at time zone 'UTC');
    end loop;
end;
$$;
