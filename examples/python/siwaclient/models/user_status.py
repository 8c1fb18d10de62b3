from enum import StrEnum


class UserStatus(StrEnum):
    ACTIVE = "active"
    CONSENT_REVOKED = "consent_revoked"
    DELETED = "deleted"

    def __str__(self) -> str:
        return str(self.value)
