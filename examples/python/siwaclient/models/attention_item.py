from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="AttentionItem")


@_attrs_define
class AttentionItem:
    """
    Attributes:
        job_id (int):
        state (str):
        attempt (int):
        since (datetime.datetime):
        apple_sub (str | Unset):
        apple_team (str | Unset):
        last_error (str | Unset):
    """

    job_id: int
    state: str
    attempt: int
    since: datetime.datetime
    apple_sub: str | Unset = UNSET
    apple_team: str | Unset = UNSET
    last_error: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        job_id = self.job_id

        state = self.state

        attempt = self.attempt

        since = self.since.isoformat()

        apple_sub = self.apple_sub

        apple_team = self.apple_team

        last_error = self.last_error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "job_id": job_id,
                "state": state,
                "attempt": attempt,
                "since": since,
            }
        )
        if apple_sub is not UNSET:
            field_dict["apple_sub"] = apple_sub
        if apple_team is not UNSET:
            field_dict["apple_team"] = apple_team
        if last_error is not UNSET:
            field_dict["last_error"] = last_error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job_id = d.pop("job_id")

        state = d.pop("state")

        attempt = d.pop("attempt")

        since = datetime.datetime.fromisoformat(d.pop("since"))

        apple_sub = d.pop("apple_sub", UNSET)

        apple_team = d.pop("apple_team", UNSET)

        last_error = d.pop("last_error", UNSET)

        attention_item = cls(
            job_id=job_id,
            state=state,
            attempt=attempt,
            since=since,
            apple_sub=apple_sub,
            apple_team=apple_team,
            last_error=last_error,
        )

        attention_item.additional_properties = d
        return attention_item

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
