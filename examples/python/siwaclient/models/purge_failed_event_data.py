from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.purge_scope import PurgeScope
from ..types import UNSET, Unset

T = TypeVar("T", bound="PurgeFailedEventData")


@_attrs_define
class PurgeFailedEventData:
    """
    Attributes:
        sub (str):
        job_id (int):
        scope (PurgeScope): `all`, or `tokens` for a sign-out that revoked the tokens only
        team (str | Unset):
        client_id (str | Unset):
        attempts (int | Unset):
        step (str | Unset):
        error (str | Unset):
    """

    sub: str
    job_id: int
    scope: PurgeScope
    team: str | Unset = UNSET
    client_id: str | Unset = UNSET
    attempts: int | Unset = UNSET
    step: str | Unset = UNSET
    error: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sub = self.sub

        job_id = self.job_id

        scope = self.scope.value

        team = self.team

        client_id = self.client_id

        attempts = self.attempts

        step = self.step

        error = self.error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sub": sub,
                "job_id": job_id,
                "scope": scope,
            }
        )
        if team is not UNSET:
            field_dict["team"] = team
        if client_id is not UNSET:
            field_dict["client_id"] = client_id
        if attempts is not UNSET:
            field_dict["attempts"] = attempts
        if step is not UNSET:
            field_dict["step"] = step
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sub = d.pop("sub")

        job_id = d.pop("job_id")

        scope = PurgeScope(d.pop("scope"))

        team = d.pop("team", UNSET)

        client_id = d.pop("client_id", UNSET)

        attempts = d.pop("attempts", UNSET)

        step = d.pop("step", UNSET)

        error = d.pop("error", UNSET)

        purge_failed_event_data = cls(
            sub=sub,
            job_id=job_id,
            scope=scope,
            team=team,
            client_id=client_id,
            attempts=attempts,
            step=step,
            error=error,
        )

        purge_failed_event_data.additional_properties = d
        return purge_failed_event_data

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
