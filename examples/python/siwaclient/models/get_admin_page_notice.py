from enum import StrEnum


class GetAdminPageNotice(StrEnum):
    CANCELLED = "cancelled"
    REFUSED = "refused"
    RETRIED = "retried"
    RUN_NOW = "run_now"

    def __str__(self) -> str:
        return str(self.value)
