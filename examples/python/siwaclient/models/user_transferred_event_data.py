from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.user_transferred_event_data_via import UserTransferredEventDataVia
from ..types import UNSET, Unset

T = TypeVar("T", bound="UserTransferredEventData")


@_attrs_define
class UserTransferredEventData:
    """
    Attributes:
        sub (str): the new sub, in the receiving team
        user_id (int):
        via (UserTransferredEventDataVia):
        team (str | Unset): the receiving team
        client_id (str | Unset):
        previous_sub (str | Unset): absent for a user imported from another siwa
        previous_team (str | Unset):
    """

    sub: str
    user_id: int
    via: UserTransferredEventDataVia
    team: str | Unset = UNSET
    client_id: str | Unset = UNSET
    previous_sub: str | Unset = UNSET
    previous_team: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sub = self.sub

        user_id = self.user_id

        via = self.via.value

        team = self.team

        client_id = self.client_id

        previous_sub = self.previous_sub

        previous_team = self.previous_team

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sub": sub,
                "user_id": user_id,
                "via": via,
            }
        )
        if team is not UNSET:
            field_dict["team"] = team
        if client_id is not UNSET:
            field_dict["client_id"] = client_id
        if previous_sub is not UNSET:
            field_dict["previous_sub"] = previous_sub
        if previous_team is not UNSET:
            field_dict["previous_team"] = previous_team

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sub = d.pop("sub")

        user_id = d.pop("user_id")

        via = UserTransferredEventDataVia(d.pop("via"))

        team = d.pop("team", UNSET)

        client_id = d.pop("client_id", UNSET)

        previous_sub = d.pop("previous_sub", UNSET)

        previous_team = d.pop("previous_team", UNSET)

        user_transferred_event_data = cls(
            sub=sub,
            user_id=user_id,
            via=via,
            team=team,
            client_id=client_id,
            previous_sub=previous_sub,
            previous_team=previous_team,
        )

        user_transferred_event_data.additional_properties = d
        return user_transferred_event_data

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
