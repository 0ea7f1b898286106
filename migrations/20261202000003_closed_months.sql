-- Closed chargeback months: closing a month freezes what its statements are made of — each
-- day's usage per namespace and flavor, tokens, capacity, and the rate in force per flavor —
-- and the database refuses any change to those rows. Statements read closed days from here,
-- so a late ingest or a rate set afterwards never changes a closed month (the difference shows
-- as an adjustment in the next open month). Reopening (an admin, audited) is the one way to
-- remove them: it runs with `gpufleet.reopening` set to the month.

create table chargeback_closed_months (
    month date primary key check (extract(day from month) = 1),
    closed_at timestamptz not null default now(),
    closed_by bigint references users (id)
);

create table chargeback_closed_usage (
    month date not null references chargeback_closed_months (month),
    day date not null check (date_trunc('month', day)::date = month),
    namespace text not null,
    flavor text not null,
    allocated_gpu_microseconds bigint,
    busy_gpu_microseconds bigint not null,
    observed_gpu_microseconds bigint not null,
    primary key (day, namespace, flavor)
);

create table chargeback_closed_tokens (
    month date not null references chargeback_closed_months (month),
    day date not null check (date_trunc('month', day)::date = month),
    namespace text not null,
    model text not null,
    prompt_tokens bigint not null,
    generation_tokens bigint not null,
    prefill_microseconds bigint not null,
    decode_microseconds bigint not null,
    primary key (day, namespace, model)
);

-- per day and flavor: the GPUs the inventory held and the rate in force (usage on a flavor
-- the inventory no longer holds keeps its rate here with 0 GPUs)
create table chargeback_closed_rates (
    month date not null references chargeback_closed_months (month),
    day date not null check (date_trunc('month', day)::date = month),
    flavor text not null,
    gpus bigint not null check (gpus >= 0),
    cents_per_gpu_hour bigint,
    primary key (day, flavor)
);

-- Rows go in only while their month is being closed, and go out only while it is reopened;
-- nothing is ever updated.
create function chargeback_closed_guard() returns trigger language plpgsql as $$
declare
    month date := case when tg_op = 'INSERT' then new.month else old.month end;
begin
    if tg_op = 'UPDATE' then
        raise exception '% is closed: its figures cannot change (reopen it first, as an admin)',
            to_char(old.month, 'YYYY-MM') using errcode = 'integrity_constraint_violation';
    end if;
    if tg_op = 'INSERT' and coalesce(current_setting('gpufleet.closing', true), '') = month::text then
        return new;
    end if;
    if tg_op = 'DELETE' and coalesce(current_setting('gpufleet.reopening', true), '') = month::text then
        return old;
    end if;
    raise exception '% is closed: its figures cannot change (reopen it first, as an admin)',
        to_char(month, 'YYYY-MM') using errcode = 'integrity_constraint_violation';
end;
$$;

create trigger chargeback_closed_months_guard before insert or update or delete on chargeback_closed_months
    for each row execute function chargeback_closed_guard();
create trigger chargeback_closed_usage_guard before insert or update or delete on chargeback_closed_usage
    for each row execute function chargeback_closed_guard();
create trigger chargeback_closed_tokens_guard before insert or update or delete on chargeback_closed_tokens
    for each row execute function chargeback_closed_guard();
create trigger chargeback_closed_rates_guard before insert or update or delete on chargeback_closed_rates
    for each row execute function chargeback_closed_guard();
create function chargeback_closed_no_truncate() returns trigger language plpgsql as $$
begin
    raise exception 'closed months cannot be truncated' using errcode = 'integrity_constraint_violation';
end;
$$;

create trigger chargeback_closed_months_no_truncate before truncate on chargeback_closed_months
    for each statement execute function chargeback_closed_no_truncate();
create trigger chargeback_closed_usage_no_truncate before truncate on chargeback_closed_usage
    for each statement execute function chargeback_closed_no_truncate();
create trigger chargeback_closed_tokens_no_truncate before truncate on chargeback_closed_tokens
    for each statement execute function chargeback_closed_no_truncate();
create trigger chargeback_closed_rates_no_truncate before truncate on chargeback_closed_rates
    for each statement execute function chargeback_closed_no_truncate();

-- Closing and reopening a month are audited.
alter table audit_log drop constraint if exists audit_log_kind_check;
alter table audit_log add constraint audit_log_kind_check
    check (kind in ('quota_request', 'flavor', 'team_queue', 'inventory', 'cluster_object',
                    'chargeback_month'));
