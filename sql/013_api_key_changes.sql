-- Changes to API keys are announced: every `siwa serve` keeps the keys it
-- verified lately in memory (APIKeyCache) and empties that cache when it
-- hears of a change, so a revoked key stops working on every instance
-- within milliseconds of the revoke's commit, without a database round trip
-- per request while nothing changes. Any revoke, rename, re-scope, new
-- secret, delete or truncate, by `siwa api-keys` or by hand in SQL, is
-- announced; `last_used_at`, written once a minute per key, is not. A new
-- key needs no announcement: unknown keys are never cached.
CREATE FUNCTION siwa.announce_api_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- NOTIFY is sent at commit, and only if the transaction commits.
    PERFORM pg_notify('siwa_api_keys', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_changed AFTER UPDATE ON siwa.api_keys
    FOR EACH ROW
    WHEN (ROW(OLD.name, OLD.prefix, OLD.secret_sha256, OLD.revoked_at, OLD.scope)
          IS DISTINCT FROM ROW(NEW.name, NEW.prefix, NEW.secret_sha256, NEW.revoked_at, NEW.scope))
    EXECUTE FUNCTION siwa.announce_api_key_change();

CREATE TRIGGER api_keys_deleted AFTER DELETE ON siwa.api_keys
    FOR EACH ROW EXECUTE FUNCTION siwa.announce_api_key_change();

CREATE TRIGGER api_keys_truncated AFTER TRUNCATE ON siwa.api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION siwa.announce_api_key_change();
