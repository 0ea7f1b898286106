-- An attempt is pending while its password is being checked and settles as a failure (or is
-- deleted with the account's failures on success). Only settled failures lock an account or
-- an address for the window; pending ones only make a caller wait a second. A pending row
-- older than a minute (its server stopped mid-check) counts as a failure.
alter table login_failures add column pending boolean not null default false;

-- Still append-only, but for settling: a pending attempt may become a failure, nothing else.
drop trigger login_failures_append_only on login_failures;

create function login_failures_settle_only() returns trigger language plpgsql as $$
begin
    if old.pending and not new.pending and (new.id, new.username, new.address, new.created_at)
        = (old.id, old.username, old.address, old.created_at) then
        return new;
    end if;
    raise exception 'login_failures is append-only: an attempt may only settle as a failure';
end;
$$;

create trigger login_failures_settle_only before update on login_failures
    for each row execute function login_failures_settle_only();
