from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="UserSignedInEventData")


@_attrs_define
class UserSignedInEventData:
    """
    Attributes:
        sub (str):
        user_id (int):
        is_new_user (bool):
        refresh_token_stored (bool):
        team (str | Unset):
        client_id (str | Unset):
    """

    sub: str
    user_id: int
    is_new_user: bool
    refresh_token_stored: bool
    team: str | Unset = UNSET
    client_id: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sub = self.sub

        user_id = self.user_id

        is_new_user = self.is_new_user

        refresh_token_stored = self.refresh_token_stored

        team = self.team

        client_id = self.client_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sub": sub,
                "user_id": user_id,
                "is_new_user": is_new_user,
                "refresh_token_stored": refresh_token_stored,
            }
        )
        if team is not UNSET:
            field_dict["team"] = team
        if client_id is not UNSET:
            field_dict["client_id"] = client_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sub = d.pop("sub")

        user_id = d.pop("user_id")

        is_new_user = d.pop("is_new_user")

        refresh_token_stored = d.pop("refresh_token_stored")

        team = d.pop("team", UNSET)

        client_id = d.pop("client_id", UNSET)

        user_signed_in_event_data = cls(
            sub=sub,
            user_id=user_id,
            is_new_user=is_new_user,
            refresh_token_stored=refresh_token_stored,
            team=team,
            client_id=client_id,
        )

        user_signed_in_event_data.additional_properties = d
        return user_signed_in_event_data

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
