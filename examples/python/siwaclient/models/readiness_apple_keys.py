from enum import StrEnum


class ReadinessAppleKeys(StrEnum):
    LOADED = "loaded"
    NOT_LOADED = "not_loaded"

    def __str__(self) -> str:
        return str(self.value)
