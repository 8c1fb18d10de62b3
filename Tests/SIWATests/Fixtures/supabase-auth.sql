-- Supabase Auth's user tables, for SupabaseRecipeTests (docs/alongside.md):
-- schema auth with users and identities as Supabase Auth defines them, and
-- the tables that hang off a user by ON DELETE CASCADE. Written for siwa from
-- a reading of Supabase Auth's public migrations (github.com/supabase/auth,
-- migrations/, at bc32168e), not copied from them: users and identities have
-- every column, type, key and cascade those migrations leave; the dependent
-- tables have their keys, their foreign keys and enough columns to hold a
-- row, and their later columns (sessions' OAuth client and refresh-token
-- columns, mfa_factors' phone and WebAuthn columns) are left out, as nothing
-- a purge does reads them. No functions, no plain indexes, no audit log,
-- SSO, SAML, flow state or OAuth tables.
--
-- What each part follows, by migration file:
--   users: 00_init_auth_schema (the table, its primary key), 20210710035447_alter_users
--     (phone and phone_change; confirmed_at renamed email_confirmed_at),
--     20210722035447_adds_confirmed_at (confirmed_at, generated),
--     20210730183235_add_email_change_confirmed (email_change_token renamed
--     email_change_token_new; email_change_token_current, email_change_confirm_status),
--     20220114185340_add_banned_until, 20220323170000_add_user_reauthentication,
--     20220429102000_add_unique_idx (the tokens' partial unique indexes),
--     20221215195500_modify_users_email_unique_index (is_sso_user; email unique
--     only where is_sso_user is false), 20230116124310_alter_phone_type (phone
--     columns text), 20230116124412_add_deleted_at, 20240214120130_add_is_anonymous_column,
--     20240806073726_drop_uniqueness_constraint_on_phone (mfa_factors only; users.phone stays unique).
--   identities: 20210909172000_create_identities_table (user_id references users
--     ON DELETE CASCADE), 20221215195800_add_identities_email_column (email,
--     generated), 20231117164230_add_id_pkey_identities (id renamed provider_id;
--     a uuid id the primary key; unique (provider_id, provider)).
--   refresh_tokens: 00_init_auth_schema (user_id varchar(255), no foreign key),
--     20210927181326_add_refresh_token_parent (parent; token unique; its foreign
--     key dropped again by 20221114143410_remove_parent_foreign_key_refresh_tokens),
--     20220811173540_add_sessions_table (session_id references sessions ON DELETE CASCADE).
--   sessions: 20220811173540_add_sessions_table (user_id references users ON DELETE
--     CASCADE), 20221003041400_add_aal_and_factor_id_to_sessions,
--     20221114143122_add_session_not_after_column, 20231027141322_add_session_refresh_columns,
--     20231114161723_add_sessions_tag.
--   mfa_factors, mfa_challenges, mfa_amr_claims: 20221003041349_add_mfa_schema
--     (user_id, factor_id and session_id each ON DELETE CASCADE),
--     20221011041400_add_mfa_indexes (mfa_amr_claims' id key).
--   one_time_tokens: 20240427152123_add_one_time_tokens_table. factor_type's 'phone':
--     20240729123726_add_mfa_phone_config.
--   Row level security on every table, no policies: 20240612123726_enable_rls_update_grants.
--
-- Run as a superuser: the schema and its tables belong to supabase_auth_admin,
-- as on Supabase (the test creates the role).

CREATE SCHEMA auth AUTHORIZATION supabase_auth_admin;
SET LOCAL ROLE supabase_auth_admin;

CREATE TYPE auth.factor_type AS ENUM ('totp', 'webauthn', 'phone');
CREATE TYPE auth.factor_status AS ENUM ('unverified', 'verified');
CREATE TYPE auth.aal_level AS ENUM ('aal1', 'aal2', 'aal3');
CREATE TYPE auth.one_time_token_type AS ENUM (
    'confirmation_token', 'reauthentication_token', 'recovery_token',
    'email_change_token_new', 'email_change_token_current', 'phone_change_token');

CREATE TABLE auth.users (
    instance_id uuid,
    id uuid NOT NULL UNIQUE,
    aud varchar(255),
    role varchar(255),
    email varchar(255),
    encrypted_password varchar(255),
    email_confirmed_at timestamptz,
    invited_at timestamptz,
    confirmation_token varchar(255),
    confirmation_sent_at timestamptz,
    recovery_token varchar(255),
    recovery_sent_at timestamptz,
    email_change_token_new varchar(255),
    email_change varchar(255),
    email_change_sent_at timestamptz,
    last_sign_in_at timestamptz,
    raw_app_meta_data jsonb,
    raw_user_meta_data jsonb,
    is_super_admin boolean,
    created_at timestamptz,
    updated_at timestamptz,
    phone text UNIQUE DEFAULT NULL,
    phone_confirmed_at timestamptz DEFAULT NULL,
    phone_change text DEFAULT '',
    phone_change_token varchar(255) DEFAULT '',
    phone_change_sent_at timestamptz DEFAULT NULL,
    confirmed_at timestamptz GENERATED ALWAYS AS (LEAST(email_confirmed_at, phone_confirmed_at)) STORED,
    email_change_token_current varchar(255) DEFAULT '',
    email_change_confirm_status smallint DEFAULT 0
        CHECK (email_change_confirm_status >= 0 AND email_change_confirm_status <= 2),
    banned_until timestamptz,
    reauthentication_token varchar(255) DEFAULT '',
    reauthentication_sent_at timestamptz DEFAULT NULL,
    is_sso_user boolean NOT NULL DEFAULT false,
    deleted_at timestamptz,
    is_anonymous boolean NOT NULL DEFAULT false,
    CONSTRAINT users_pkey PRIMARY KEY (id)
);
CREATE UNIQUE INDEX users_email_partial_key ON auth.users (email) WHERE is_sso_user = false;
CREATE UNIQUE INDEX confirmation_token_idx ON auth.users (confirmation_token) WHERE confirmation_token !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX recovery_token_idx ON auth.users (recovery_token) WHERE recovery_token !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX email_change_token_current_idx ON auth.users (email_change_token_current)
    WHERE email_change_token_current !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX email_change_token_new_idx ON auth.users (email_change_token_new)
    WHERE email_change_token_new !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX reauthentication_token_idx ON auth.users (reauthentication_token)
    WHERE reauthentication_token !~ '^[0-9 ]*$';

-- provider_id is the provider's own id of the user: for provider 'apple',
-- the identity token's sub (identity_data's "sub").
CREATE TABLE auth.identities (
    provider_id text NOT NULL,
    user_id uuid NOT NULL,
    identity_data jsonb NOT NULL,
    provider text NOT NULL,
    last_sign_in_at timestamptz,
    created_at timestamptz,
    updated_at timestamptz,
    email text GENERATED ALWAYS AS (lower(identity_data ->> 'email')) STORED,
    id uuid DEFAULT gen_random_uuid() PRIMARY KEY,
    CONSTRAINT identities_provider_id_provider_unique UNIQUE (provider_id, provider),
    CONSTRAINT identities_user_id_fkey FOREIGN KEY (user_id) REFERENCES auth.users (id) ON DELETE CASCADE
);

CREATE TABLE auth.sessions (
    id uuid NOT NULL,
    user_id uuid NOT NULL,
    created_at timestamptz,
    updated_at timestamptz,
    factor_id uuid,
    aal auth.aal_level,
    not_after timestamptz,
    refreshed_at timestamp,
    user_agent text,
    ip inet,
    tag text,
    CONSTRAINT sessions_pkey PRIMARY KEY (id),
    CONSTRAINT sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES auth.users (id) ON DELETE CASCADE
);

CREATE TABLE auth.refresh_tokens (
    instance_id uuid,
    id bigserial NOT NULL,
    token varchar(255),
    user_id varchar(255),
    revoked boolean,
    created_at timestamptz,
    updated_at timestamptz,
    parent varchar(255),
    session_id uuid,
    CONSTRAINT refresh_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT refresh_tokens_token_unique UNIQUE (token),
    CONSTRAINT refresh_tokens_session_id_fkey FOREIGN KEY (session_id) REFERENCES auth.sessions (id) ON DELETE CASCADE
);

CREATE TABLE auth.mfa_factors (
    id uuid NOT NULL,
    user_id uuid NOT NULL,
    friendly_name text,
    factor_type auth.factor_type NOT NULL,
    status auth.factor_status NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    secret text,
    CONSTRAINT mfa_factors_pkey PRIMARY KEY (id),
    CONSTRAINT mfa_factors_user_id_fkey FOREIGN KEY (user_id) REFERENCES auth.users (id) ON DELETE CASCADE
);

CREATE TABLE auth.mfa_challenges (
    id uuid NOT NULL,
    factor_id uuid NOT NULL,
    created_at timestamptz NOT NULL,
    verified_at timestamptz,
    ip_address inet NOT NULL,
    CONSTRAINT mfa_challenges_pkey PRIMARY KEY (id),
    CONSTRAINT mfa_challenges_auth_factor_id_fkey FOREIGN KEY (factor_id) REFERENCES auth.mfa_factors (id) ON DELETE CASCADE
);

CREATE TABLE auth.mfa_amr_claims (
    session_id uuid NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    authentication_method text NOT NULL,
    id uuid NOT NULL,
    CONSTRAINT amr_id_pk PRIMARY KEY (id),
    CONSTRAINT mfa_amr_claims_session_id_authentication_method_pkey UNIQUE (session_id, authentication_method),
    CONSTRAINT mfa_amr_claims_session_id_fkey FOREIGN KEY (session_id) REFERENCES auth.sessions (id) ON DELETE CASCADE
);

CREATE TABLE auth.one_time_tokens (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES auth.users ON DELETE CASCADE,
    token_type auth.one_time_token_type NOT NULL,
    token_hash text NOT NULL CHECK (char_length(token_hash) > 0),
    relates_to text NOT NULL,
    created_at timestamp NOT NULL DEFAULT now(),
    updated_at timestamp NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX one_time_tokens_user_id_token_type_key ON auth.one_time_tokens (user_id, token_type);

ALTER TABLE auth.users ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.identities ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.refresh_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.mfa_factors ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.mfa_challenges ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.mfa_amr_claims ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.one_time_tokens ENABLE ROW LEVEL SECURITY;
