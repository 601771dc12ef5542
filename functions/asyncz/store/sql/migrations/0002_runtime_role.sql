-- The role the functions connect as at run time (issue 14): DML on the job tables and
-- nothing else. Migrations keep running as the owner; this role owns nothing, so it cannot
-- DROP, ALTER or TRUNCATE, and (PostgreSQL >= 15) it cannot CREATE in schema public.
-- NOLOGIN here: the deploy's migration step gives it LOGIN and the password of its own
-- secret (asyncz.store.migrations.provision_runtime_role). Roles are cluster-wide, so a
-- concurrent migration of another database may create it first: that is fine.
DO $$
BEGIN
    CREATE ROLE asyncz_app NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

GRANT USAGE ON SCHEMA public TO asyncz_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON jobs, job_attempts TO asyncz_app;
GRANT SELECT ON schema_migrations TO asyncz_app;
-- tables and sequences that later migrations create get the same rights
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO asyncz_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO asyncz_app;
