from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PurgeLatency")


@_attrs_define
class PurgeLatency:
    """
    Attributes:
        job_id (int):
        requested_at (datetime.datetime):
        state (str):
        apple_sub (str | Unset):
        apple_team (str | Unset):
        event_type (str | Unset):
        completed_at (datetime.datetime | Unset):
        seconds (float | Unset):
    """

    job_id: int
    requested_at: datetime.datetime
    state: str
    apple_sub: str | Unset = UNSET
    apple_team: str | Unset = UNSET
    event_type: str | Unset = UNSET
    completed_at: datetime.datetime | Unset = UNSET
    seconds: float | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        job_id = self.job_id

        requested_at = self.requested_at.isoformat()

        state = self.state

        apple_sub = self.apple_sub

        apple_team = self.apple_team

        event_type = self.event_type

        completed_at: str | Unset = UNSET
        if not isinstance(self.completed_at, Unset):
            completed_at = self.completed_at.isoformat()

        seconds = self.seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "job_id": job_id,
                "requested_at": requested_at,
                "state": state,
            }
        )
        if apple_sub is not UNSET:
            field_dict["apple_sub"] = apple_sub
        if apple_team is not UNSET:
            field_dict["apple_team"] = apple_team
        if event_type is not UNSET:
            field_dict["event_type"] = event_type
        if completed_at is not UNSET:
            field_dict["completed_at"] = completed_at
        if seconds is not UNSET:
            field_dict["seconds"] = seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job_id = d.pop("job_id")

        requested_at = datetime.datetime.fromisoformat(d.pop("requested_at"))

        state = d.pop("state")

        apple_sub = d.pop("apple_sub", UNSET)

        apple_team = d.pop("apple_team", UNSET)

        event_type = d.pop("event_type", UNSET)

        _completed_at = d.pop("completed_at", UNSET)
        completed_at: datetime.datetime | Unset
        if isinstance(_completed_at, Unset):
            completed_at = UNSET
        else:
            completed_at = datetime.datetime.fromisoformat(_completed_at)

        seconds = d.pop("seconds", UNSET)

        purge_latency = cls(
            job_id=job_id,
            requested_at=requested_at,
            state=state,
            apple_sub=apple_sub,
            apple_team=apple_team,
            event_type=event_type,
            completed_at=completed_at,
            seconds=seconds,
        )

        purge_latency.additional_properties = d
        return purge_latency

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
