-- siwa's database and roles for deploy/compose.yaml, run once by the
-- postgres image when its data volume is new. The schema's owner runs
-- `siwa migrate`, which grants each runtime role what its process needs;
-- they own nothing and none is a superuser. The worker's role is NOINHERIT:
-- it holds siwa_purge's privileges only inside a purge plan's SQL step (SET
-- LOCAL ROLE). The passwords are for trying siwa on one machine.
CREATE ROLE siwa_owner LOGIN PASSWORD 'siwa_owner';
CREATE ROLE siwa_serve LOGIN PASSWORD 'siwa_serve';
CREATE ROLE siwa_worker LOGIN NOINHERIT PASSWORD 'siwa_worker';
CREATE ROLE siwa_purge NOLOGIN;
GRANT siwa_purge TO siwa_worker;
CREATE ROLE siwa_admin NOLOGIN;
CREATE ROLE siwa_auditor NOLOGIN;
CREATE DATABASE siwa OWNER siwa_owner;
