from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="UserDeletionRequestedEventData")


@_attrs_define
class UserDeletionRequestedEventData:
    """
    Attributes:
        sub (str):
        user_id (int):
        purge_job_id (int):
        team (str | Unset):
        client_id (str | Unset):
        merged (bool | Unset): the request joined a purge already pending
    """

    sub: str
    user_id: int
    purge_job_id: int
    team: str | Unset = UNSET
    client_id: str | Unset = UNSET
    merged: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sub = self.sub

        user_id = self.user_id

        purge_job_id = self.purge_job_id

        team = self.team

        client_id = self.client_id

        merged = self.merged

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sub": sub,
                "user_id": user_id,
                "purge_job_id": purge_job_id,
            }
        )
        if team is not UNSET:
            field_dict["team"] = team
        if client_id is not UNSET:
            field_dict["client_id"] = client_id
        if merged is not UNSET:
            field_dict["merged"] = merged

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sub = d.pop("sub")

        user_id = d.pop("user_id")

        purge_job_id = d.pop("purge_job_id")

        team = d.pop("team", UNSET)

        client_id = d.pop("client_id", UNSET)

        merged = d.pop("merged", UNSET)

        user_deletion_requested_event_data = cls(
            sub=sub,
            user_id=user_id,
            purge_job_id=purge_job_id,
            team=team,
            client_id=client_id,
            merged=merged,
        )

        user_deletion_requested_event_data.additional_properties = d
        return user_deletion_requested_event_data

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
