-- The recorder follows Workloads by watch after each complete listing: when the watch last
-- delivered a change or a bookmark (the history is current to then); cleared when it fails.
alter table workload_recorder add column watched_at timestamptz;
