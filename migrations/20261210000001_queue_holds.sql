-- Holds (shared::chargeback::budget::Hold): once a team's month burns its whole budget, a
-- proposal to hold its ClusterQueue (Kueue's spec.stopPolicy: Hold). Nothing is held until an
-- approver confirms it; released the same way; every step audited (kind 'budget').
create table queue_holds (
    id bigint generated always as identity primary key,
    team_id bigint not null references teams (id) on delete cascade,
    month date not null check (extract(day from month) = 1),
    -- the budget as set when it was proposed (shared::chargeback::budget::limit_key)
    limit_key text not null,
    state text not null default 'proposed'
        check (state in ('proposed', 'held', 'released', 'dismissed')),
    reason text not null,
    proposed_at timestamptz not null default now(),
    decided_by bigint references users (id) on delete set null,
    decided_at timestamptz,
    released_by bigint references users (id) on delete set null,
    released_at timestamptz,
    -- proposed once per budget as set: a dismissed or released hold is not proposed again
    unique (team_id, month, limit_key)
);
-- At most one hold proposed or in force per team.
create unique index queue_holds_open on queue_holds (team_id) where state in ('proposed', 'held');
