from enum import StrEnum


class NotificationReasonCode(StrEnum):
    BAD_SIGNATURE = "bad_signature"
    EMPTY_BODY = "empty_body"
    EXPIRED = "expired"
    EXP_OUT_OF_RANGE = "exp_out_of_range"
    IAT_IN_FUTURE = "iat_in_future"
    IAT_OUT_OF_RANGE = "iat_out_of_range"
    MALFORMED_BODY = "malformed_body"
    MALFORMED_CLAIMS = "malformed_claims"
    MALFORMED_EVENTS = "malformed_events"
    MALFORMED_HEADER = "malformed_header"
    MALFORMED_TOKEN = "malformed_token"
    MISSING_AUD = "missing_aud"
    MISSING_EXP = "missing_exp"
    MISSING_IAT = "missing_iat"
    MISSING_JTI = "missing_jti"
    MISSING_KID = "missing_kid"
    MISSING_PAYLOAD = "missing_payload"
    UNKNOWN_KID = "unknown_kid"
    UNREADABLE_BODY = "unreadable_body"
    UNSUPPORTED_ALG = "unsupported_alg"
    UNSUPPORTED_CRIT = "unsupported_crit"
    WRONG_AUD = "wrong_aud"
    WRONG_ISSUER = "wrong_issuer"

    def __str__(self) -> str:
        return str(self.value)
