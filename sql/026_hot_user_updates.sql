-- A notification about a user writes no index of the users' table (issue
-- 20 §6).
--
-- PostgreSQL updates a row without touching its table's indexes (a
-- heap-only tuple, HOT) only when no column an index reads changes, the
-- columns of a partial index's predicate included, and the row's page has
-- room for the new version. Apple's events change a user's status or email
-- state, and Apple's notifications about users siwa has not heard of yet
-- insert them.

-- sql/025's index of the active users' addresses read `status`, so every
-- consent revocation and account deletion wrote a new entry into each of
-- the users' indexes, and every user a notification inserted wrote one
-- more entry than the rest of the notification needs. What it served is an
-- admin's lookup by address (siwa.find_user_by_email_by_key), a person
-- answering a support request: that now reads the table, which on a
-- million users takes a fraction of a second (`make bench` measures it).
DROP INDEX siwa.users_active_email_idx;

-- Every notification and sign-in rewrites its user's row: leave a tenth of
-- each page free for the new versions, so they stay on the page and out of
-- the indexes. Pages written before this migration keep no room until
-- their rows move (VACUUM FULL rewrites them at once: deploy/README.md,
-- "Upgrade").
ALTER TABLE siwa.users SET (fillfactor = 90);
