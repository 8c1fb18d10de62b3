from enum import StrEnum


class PurgeCancelledEventDataReason(StrEnum):
    SIGNED_IN_AGAIN = "signed_in_again"

    def __str__(self) -> str:
        return str(self.value)
