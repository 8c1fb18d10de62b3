from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WaitingPurge")


@_attrs_define
class WaitingPurge:
    """
    Attributes:
        job_id (int):
        requested_at (datetime.datetime):
        due_at (datetime.datetime):
        apple_sub (str | Unset):
        apple_team (str | Unset):
    """

    job_id: int
    requested_at: datetime.datetime
    due_at: datetime.datetime
    apple_sub: str | Unset = UNSET
    apple_team: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        job_id = self.job_id

        requested_at = self.requested_at.isoformat()

        due_at = self.due_at.isoformat()

        apple_sub = self.apple_sub

        apple_team = self.apple_team

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "job_id": job_id,
                "requested_at": requested_at,
                "due_at": due_at,
            }
        )
        if apple_sub is not UNSET:
            field_dict["apple_sub"] = apple_sub
        if apple_team is not UNSET:
            field_dict["apple_team"] = apple_team

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job_id = d.pop("job_id")

        requested_at = datetime.datetime.fromisoformat(d.pop("requested_at"))

        due_at = datetime.datetime.fromisoformat(d.pop("due_at"))

        apple_sub = d.pop("apple_sub", UNSET)

        apple_team = d.pop("apple_team", UNSET)

        waiting_purge = cls(
            job_id=job_id,
            requested_at=requested_at,
            due_at=due_at,
            apple_sub=apple_sub,
            apple_team=apple_team,
        )

        waiting_purge.additional_properties = d
        return waiting_purge

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
