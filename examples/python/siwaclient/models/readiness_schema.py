from enum import StrEnum


class ReadinessSchema(StrEnum):
    WAITING_FOR_MIGRATE = "waiting_for_migrate"

    def __str__(self) -> str:
        return str(self.value)
