from enum import StrEnum


class SignInConflictError(StrEnum):
    DELETION_IN_PROGRESS = "deletion_in_progress"
    STALE_IDENTITY_TOKEN = "stale_identity_token"

    def __str__(self) -> str:
        return str(self.value)
