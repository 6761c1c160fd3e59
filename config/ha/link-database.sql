-- The link ledger's role and database, made once on the primary after Patroni bootstrapped
-- the cluster (docs/ha.md): psql -h db1 -U postgres -f link-database.sql
-- The role's password: \password link (kept out of this file); the link controller reads it
-- from [ledger] password_file or libpq's password file.
CREATE ROLE link LOGIN;
CREATE DATABASE link_a OWNER link;
-- Then, on a link controller: progressived init --config /etc/progressived/link.toml
