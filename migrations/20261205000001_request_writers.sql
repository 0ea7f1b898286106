-- Four eyes over edits: everyone who wrote a version of a request's spec (who drafted it and
-- each member or admin who edited it). Nobody listed approves it, whoever submits it.
alter table quota_requests add column written_by bigint[] not null default '{}';
update quota_requests set written_by = array[created_by];

-- whoever drafts a request wrote its first version, however the row is made
create function quota_requests_drafter_wrote() returns trigger language plpgsql as $$
begin
    if not (new.created_by = any (new.written_by)) then
        new.written_by := new.written_by || new.created_by;
    end if;
    return new;
end;
$$;

create trigger quota_requests_drafter_wrote before insert on quota_requests
    for each row execute function quota_requests_drafter_wrote();

alter table quota_requests
    add constraint quota_requests_no_writer_approves
        check (approval_order is null or not (decided_by = any (written_by)));
