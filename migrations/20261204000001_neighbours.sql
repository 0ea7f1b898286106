-- Noisy neighbours (shared::usage::neighbours): vLLM's latency histograms per inference
-- service and minute, its pods' added (the vllm source), and who shares each pod's GPUs and
-- how busy they are (the dcgm source). Partitioned by UTC month like the other minute tables,
-- and dropped with them by retention.

create table usage_latency_minutes (
    minute timestamptz not null check (date_trunc('minute', minute) = minute),
    namespace text not null,
    -- vLLM's model_name
    model text not null,
    -- the pods whose histograms are added here
    pods text[] not null,
    -- vllm:time_to_first_token_seconds: finite bucket bounds (le) in microseconds, ascending,
    -- each bucket's increase in the minute (cumulative, as Prometheus's buckets are), and the
    -- +Inf bucket's (every observation; null when no +Inf series was seen)
    ttft_le_microseconds bigint[] not null,
    ttft_counts bigint[] not null
        check (cardinality(ttft_counts) = cardinality(ttft_le_microseconds)),
    ttft_observations bigint check (ttft_observations >= 0),
    -- vllm:request_queue_time_seconds, the same way
    queue_le_microseconds bigint[] not null,
    queue_counts bigint[] not null
        check (cardinality(queue_counts) = cardinality(queue_le_microseconds)),
    queue_observations bigint check (queue_observations >= 0),
    primary key (minute, namespace, model)
) partition by range (minute);

-- Pods on MIG instances or on devices shared with other pods, per minute (a pod alone on
-- whole cards has no row).
create table usage_pod_minutes (
    minute timestamptz not null check (date_trunc('minute', minute) = minute),
    namespace text not null,
    pod text not null,
    -- 'shared' when pods share a device and the flavor does not say how
    sharing text not null
        check (sharing in ('mig', 'time_slicing', 'mps', 'hami_fractions', 'shared')),
    neighbours integer not null check (neighbours >= 0),
    neighbour_busy_gpu_microseconds bigint not null check (neighbour_busy_gpu_microseconds >= 0),
    neighbour_observed_gpu_microseconds bigint not null
        check (neighbour_observed_gpu_microseconds >= 0),
    primary key (minute, namespace, pod)
) partition by range (minute);

-- The minute tables partitioned by month: the one list partitioning and retention read.
create function usage_minute_tables() returns text[] language sql immutable as $$
    select array['usage_minutes', 'usage_token_minutes', 'usage_latency_minutes',
                 'usage_pod_minutes']
$$;

create or replace function usage_ensure_partitions(from_at timestamptz, to_at timestamptz)
returns void language plpgsql as $$
declare
    month timestamp := date_trunc('month', from_at at time zone 'UTC');
    parent text;
begin
    while (month at time zone 'UTC') < to_at loop
        foreach parent in array usage_minute_tables() loop
            execute format(
                'create table if not exists %I partition of %I for values from (%L) to (%L)',
                parent || '_' || to_char(month, 'YYYY_MM'), parent,
                month at time zone 'UTC', (month + interval '1 month') at time zone 'UTC');
        end loop;
        month := month + interval '1 month';
    end loop;
end;
$$;

create or replace function usage_drop_partitions(before timestamptz)
returns integer language plpgsql as $$
declare
    part record;
    dropped integer := 0;
begin
    for part in
        select c.relname, p.relname as parent
        from pg_inherits i
        join pg_class c on c.oid = i.inhrelid
        join pg_class p on p.oid = i.inhparent
        where p.relname = any(usage_minute_tables())
    loop
        if (to_date(right(part.relname, 7), 'YYYY_MM')::timestamp + interval '1 month')
               at time zone 'UTC' <= before then
            execute format('drop table %I', part.relname);
            dropped := dropped + 1;
        end if;
    end loop;
    return dropped;
end;
$$;
