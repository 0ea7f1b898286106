-- The history is read a page at a time in (created_at, uid) order, each page after the last
-- one's key: an index in that order serves each page from where the last stopped.
drop index workload_history_created;
create index workload_history_created_uid on workload_history (created_at, uid);
