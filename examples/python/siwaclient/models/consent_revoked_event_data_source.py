from enum import StrEnum


class ConsentRevokedEventDataSource(StrEnum):
    APPLE = "apple"
    INVALID_GRANT = "invalid_grant"

    def __str__(self) -> str:
        return str(self.value)
