-- Borrowing and lending within a cohort (shared::usage::lending_minutes), written by the Kueue
-- ingest with the allocation: the queue's nominal quota in the minute (Kueue's
-- kueue_cluster_queue_nominal_quota), what it used above it (borrowed), and the part of its
-- unused quota that others' borrowing is attributed to (lent), in GPU-microseconds. Null where
-- Kueue reported no nominal quota (unknown, not zero). Summed into the rollups, and frozen with
-- a closed month so lending credits of closed months never change.
alter table usage_minutes
    add column nominal_gpu_microseconds bigint check (nominal_gpu_microseconds >= 0),
    add column borrowed_gpu_microseconds bigint check (borrowed_gpu_microseconds >= 0),
    add column lent_gpu_microseconds bigint check (lent_gpu_microseconds >= 0);

alter table usage_rollups
    add column nominal_gpu_microseconds bigint,
    add column borrowed_gpu_microseconds bigint,
    add column lent_gpu_microseconds bigint;

alter table chargeback_closed_usage
    add column borrowed_gpu_microseconds bigint,
    add column lent_gpu_microseconds bigint;
