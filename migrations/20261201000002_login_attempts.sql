-- The throttle records each log-in attempt before its password is checked (under advisory
-- locks, so concurrent attempts are counted one after another); a successful log-in deletes
-- the account's rows, a failed one leaves its row as the failure's record.
comment on table login_failures is
    'Log-in attempts that failed or are being checked; counted per account and per address over 15 minutes.';
