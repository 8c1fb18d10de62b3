from enum import StrEnum


class SignInReasonCode(StrEnum):
    AUTHORIZATION_CODE_OR_NONCE_REQUIRED = "authorization_code_or_nonce_required"
    AUTHORIZATION_CODE_REQUIRED = "authorization_code_required"
    BAD_SIGNATURE = "bad_signature"
    CLIENT_ID_REQUIRED = "client_id_required"
    EXPIRED = "expired"
    EXP_OUT_OF_RANGE = "exp_out_of_range"
    IAT_IN_FUTURE = "iat_in_future"
    IAT_OUT_OF_RANGE = "iat_out_of_range"
    IDENTITY_TOKEN_OR_CODE_REQUIRED = "identity_token_or_code_required"
    INVALID_GRANT = "invalid_grant"
    INVALID_REQUEST = "invalid_request"
    MALFORMED_CLAIMS = "malformed_claims"
    MALFORMED_EVENTS = "malformed_events"
    MALFORMED_HEADER = "malformed_header"
    MALFORMED_IDENTITY_CLAIMS = "malformed_identity_claims"
    MALFORMED_REQUEST = "malformed_request"
    MALFORMED_TOKEN = "malformed_token"
    MISSING_AUD = "missing_aud"
    MISSING_EXP = "missing_exp"
    MISSING_IAT = "missing_iat"
    MISSING_JTI = "missing_jti"
    MISSING_KID = "missing_kid"
    MISSING_SUB = "missing_sub"
    NONCE_MISMATCH = "nonce_mismatch"
    NONCE_MISSING = "nonce_missing"
    REDIRECT_URI_REQUIRED = "redirect_uri_required"
    TOKEN_MISMATCH = "token_mismatch"
    UNKNOWN_KID = "unknown_kid"
    UNSUPPORTED_ALG = "unsupported_alg"
    UNSUPPORTED_CRIT = "unsupported_crit"
    WRONG_AUD = "wrong_aud"
    WRONG_ISSUER = "wrong_issuer"

    def __str__(self) -> str:
        return str(self.value)
