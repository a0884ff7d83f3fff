-- Grants of ax's runtime role: what `ax serve --no-migrate` needs when it
-- does not own the schema (the owner/runtime split of managed Postgres:
-- `ax migrate up` runs as the owner, replicas as the runtime role).
--
-- Run it as the owner role (the one that ran `ax migrate up`), in ax's
-- database, after `ax migrate up`: psql "$OWNER_URL" -f sql/runtime_role.sql
-- Replace ax_owner and ax_runtime with your roles' names; create the
-- runtime role first, e.g. CREATE ROLE ax_runtime LOGIN PASSWORD '…'.
--
-- The runtime role reads and writes ax's rows and runs its functions; it
-- changes no table. What it cannot do, and ax reports rather than hides:
-- VACUUM (owners only; ax's vacuumer then logs it once, sets
-- ax_vacuum_denied and leaves the tables to autovacuum, which managed
-- services run); and making or dropping history partitions (a replica
-- then says so once and sets ax_history_maintenance_denied: run
-- `ax maintain` as the owner at least daily).

GRANT USAGE ON SCHEMA ax TO ax_runtime;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ax TO ax_runtime;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ax TO ax_runtime;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ax TO ax_runtime;

-- Tables, sequences and functions that later migrations (or history
-- partitions) create as the owner get the same grants.
ALTER DEFAULT PRIVILEGES FOR ROLE ax_owner IN SCHEMA ax
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ax_runtime;
ALTER DEFAULT PRIVILEGES FOR ROLE ax_owner IN SCHEMA ax
    GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO ax_runtime;
ALTER DEFAULT PRIVILEGES FOR ROLE ax_owner IN SCHEMA ax
    GRANT EXECUTE ON FUNCTIONS TO ax_runtime;
