-- Four eyes over edits: everyone who wrote a version of a request's spec (who drafted it and
-- each member or admin who edited it). Nobody listed approves it, whoever submits it.
alter table quota_requests add column written_by bigint[] not null default '{}';
update quota_requests set written_by = array[created_by];
alter table quota_requests
    add constraint quota_requests_written_by_drafter check (created_by = any (written_by)),
    add constraint quota_requests_no_writer_approves
        check (approval_order is null or not (decided_by = any (written_by)));
