-- Where an approved request's queues landed, in words the requester reads: "applied to the
-- cluster", or the GitOps files they were written to (which gpufleet does not apply itself).
alter table quota_requests add column applied_to text check (length(applied_to) <= 1000);
