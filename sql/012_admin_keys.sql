-- Admin keys: an API key gets a scope. `app` (every key made before this
-- migration, and the default) is the app's backend calling `/v1`; `admin`
-- opens the admin listener (`/admin`, SIWA_ADMIN_HTTP_PORT) and nothing
-- else. Each scope is refused on the other's routes (403), so a key the
-- app's backend holds cannot read the audit trail or requeue jobs, and an
-- admin's key cannot sign users in.
ALTER TABLE siwa.api_keys
    ADD COLUMN scope text NOT NULL DEFAULT 'app' CHECK (scope IN ('app', 'admin'));

-- `siwa api-keys` shows it (siwa_admin's INSERT is table-wide already);
-- auditors see which keys can open the admin listener.
GRANT SELECT (scope) ON siwa.api_keys TO siwa_admin, siwa_auditor;

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (12, 1, 'serve checks a key''s scope: app keys on /v1, admin keys on the admin listener',
        'GRANT SELECT (scope) ON siwa.api_keys TO %I');
