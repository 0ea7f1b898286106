-- Budgets (shared::chargeback::budget): what a team may spend in a month, in cents or whole
-- GPU-hours, on one basis, with the thresholds that raise an alert. Set by finance or admins,
-- audited (kind 'budget').
create table budgets (
    team_id bigint not null references teams (id) on delete cascade,
    month date not null check (extract(day from month) = 1),
    limit_cents bigint check (limit_cents between 1 and 100000000000),
    limit_gpu_hours bigint check (limit_gpu_hours between 1 and 100000000000),
    basis text not null check (basis in ('allocation', 'use')),
    thresholds_pct smallint[] not null
        check (cardinality(thresholds_pct) between 1 and 10 and 0 < all (thresholds_pct)
               and 1000 >= all (thresholds_pct)),
    set_by bigint references users (id),
    set_at timestamptz not null default now(),
    primary key (team_id, month),
    check ((limit_cents is null) <> (limit_gpu_hours is null))
);

-- Each threshold a budget's burn or forecast crossed, raised once per budget as set (`limit_key`
-- names the limit and basis, so a changed budget may alert again), and the outbox of the
-- webhook: an alert stays until a POST of it is answered 2xx, retried with backoff meanwhile.
create table budget_alerts (
    id bigint generated always as identity primary key,
    team_id bigint not null references teams (id) on delete cascade,
    month date not null check (extract(day from month) = 1),
    limit_key text not null,
    threshold_pct smallint not null check (threshold_pct between 1 and 1000),
    crossing text not null check (crossing in ('actual', 'forecast')),
    raised_at timestamptz not null default now(),
    -- what the webhook is sent (and the page shows)
    body jsonb not null check (jsonb_typeof(body) = 'object'),
    delivered_at timestamptz,
    attempts integer not null default 0 check (attempts >= 0),
    last_error text,
    next_attempt_at timestamptz not null default now(),
    unique (team_id, month, limit_key, threshold_pct, crossing)
);
create index budget_alerts_undelivered on budget_alerts (next_attempt_at) where delivered_at is null;

alter table audit_log drop constraint if exists audit_log_kind_check;
alter table audit_log add constraint audit_log_kind_check
    check (kind in ('quota_request', 'flavor', 'team_queue', 'inventory', 'cluster_object',
                    'chargeback_month', 'budget'));
