-- Usage from metrics (shared::usage, backend::usage): GPU time per minute (UTC) read from
-- Prometheus, exactly, in integer GPU-microseconds (60,000,000 per GPU-minute), partitioned by
-- month, with hour and day rollups kept with the minutes; token counts per model; a watermark
-- per source and the windows that failed (gaps).

-- Per minute and owner: a team's namespace, an unattributed namespace, '' for a device no pod
-- holds, or (namespace '') the ClusterQueue of allocation no team owns. Each source writes its
-- own columns: null means that source has said nothing of this minute (for allocation: not
-- known, which is not zero).
create table usage_minutes (
    minute timestamptz not null check (date_trunc('minute', minute) = minute),
    namespace text not null,
    cluster_queue text not null default '',
    -- '' when a device's flavor cannot be told (see README: "Usage from Prometheus")
    flavor text not null,
    -- the team owning the namespace or ClusterQueue when the minute was ingested
    team_id bigint references teams (id) on delete set null,
    -- Kueue: quota in use (kueue_cluster_queue_resource_usage), MIG at its compute share
    allocated_gpu_microseconds bigint check (allocated_gpu_microseconds >= 0),
    -- DCGM: busy ratio × share × time each sample stands for
    busy_gpu_microseconds bigint check (busy_gpu_microseconds >= 0),
    -- DCGM: device time that had a sample
    observed_gpu_microseconds bigint check (observed_gpu_microseconds >= 0),
    -- DCGM: Σ over devices of the minute's mean framebuffer used
    fb_used_mib bigint check (fb_used_mib >= 0),
    primary key (minute, namespace, cluster_queue, flavor)
) partition by range (minute);

-- vLLM's counters, per minute, namespace and served model.
create table usage_token_minutes (
    minute timestamptz not null check (date_trunc('minute', minute) = minute),
    namespace text not null,
    model text not null,
    team_id bigint references teams (id) on delete set null,
    prompt_tokens bigint not null check (prompt_tokens >= 0),
    generation_tokens bigint not null check (generation_tokens >= 0),
    -- time requests spent in prefill and in decode (vLLM's histogram sums), in microseconds
    prefill_microseconds bigint not null default 0 check (prefill_microseconds >= 0),
    decode_microseconds bigint not null default 0 check (decode_microseconds >= 0),
    primary key (minute, namespace, model)
) partition by range (minute);

-- Hour and day sums of the minutes, rewritten with every ingested window, kept when minute
-- partitions are dropped by retention. `minutes` counts the minute rows summed;
-- fb_used_mib_minutes is Σ of the minutes' fb_used_mib.
create table usage_rollups (
    grain text not null check (grain in ('hour', 'day')),
    period timestamptz not null,
    namespace text not null,
    cluster_queue text not null,
    flavor text not null,
    team_id bigint references teams (id) on delete set null,
    allocated_gpu_microseconds bigint,
    busy_gpu_microseconds bigint,
    observed_gpu_microseconds bigint,
    fb_used_mib_minutes bigint,
    minutes integer not null,
    primary key (grain, period, namespace, cluster_queue, flavor)
);

create table usage_token_rollups (
    grain text not null check (grain in ('hour', 'day')),
    period timestamptz not null,
    namespace text not null,
    model text not null,
    team_id bigint references teams (id) on delete set null,
    prompt_tokens bigint not null,
    generation_tokens bigint not null,
    prefill_microseconds bigint not null,
    decode_microseconds bigint not null,
    primary key (grain, period, namespace, model)
);

-- Everything before `watermark` is ingested; the next window starts there.
create table usage_sources (
    source text primary key check (source in ('kueue', 'dcgm', 'vllm')),
    watermark timestamptz,
    last_attempt_at timestamptz,
    last_success_at timestamptz,
    last_error text,
    last_error_at timestamptz,
    -- what the last window showed that a person must know (e.g. Kueue's series are absent)
    note text
);

insert into usage_sources (source) values ('kueue'), ('dcgm'), ('vllm');

-- Windows that could not be ingested, until they are.
create table usage_gaps (
    id bigint generated always as identity primary key,
    source text not null references usage_sources (source),
    from_at timestamptz not null,
    to_at timestamptz not null check (to_at > from_at),
    error text not null,
    attempts integer not null default 1 check (attempts >= 1),
    first_failed_at timestamptz not null default now(),
    last_failed_at timestamptz not null default now(),
    resolved_at timestamptz
);

create unique index usage_gaps_open on usage_gaps (source, from_at) where resolved_at is null;

-- Monthly partitions (UTC months) of both minute tables for [from_at, to_at), made when missing.
create function usage_ensure_partitions(from_at timestamptz, to_at timestamptz)
returns void language plpgsql as $$
declare
    month timestamp := date_trunc('month', from_at at time zone 'UTC');
    parent text;
begin
    while (month at time zone 'UTC') < to_at loop
        foreach parent in array array['usage_minutes', 'usage_token_minutes'] loop
            execute format(
                'create table if not exists %I partition of %I for values from (%L) to (%L)',
                parent || '_' || to_char(month, 'YYYY_MM'), parent,
                month at time zone 'UTC', (month + interval '1 month') at time zone 'UTC');
        end loop;
        month := month + interval '1 month';
    end loop;
end;
$$;

-- Drops the minute partitions that end at or before `before` (rollups stay); returns how many.
create function usage_drop_partitions(before timestamptz)
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
        where p.relname in ('usage_minutes', 'usage_token_minutes')
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
