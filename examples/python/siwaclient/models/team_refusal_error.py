from enum import StrEnum


class TeamRefusalError(StrEnum):
    TEAM_REQUIRED = "team_required"
    UNKNOWN_CLIENT = "unknown_client"
    UNKNOWN_TEAM = "unknown_team"

    def __str__(self) -> str:
        return str(self.value)
