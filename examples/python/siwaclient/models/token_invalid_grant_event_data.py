from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TokenInvalidGrantEventData")


@_attrs_define
class TokenInvalidGrantEventData:
    """
    Attributes:
        sub (str):
        team (str | Unset):
        client_id (str | Unset):
        user_id (int | Unset):
        session_ended (bool | Unset):
        signed_out (bool | Unset): rows written before 0.10, instead of session_ended
        purge (bool | Unset):
    """

    sub: str
    team: str | Unset = UNSET
    client_id: str | Unset = UNSET
    user_id: int | Unset = UNSET
    session_ended: bool | Unset = UNSET
    signed_out: bool | Unset = UNSET
    purge: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sub = self.sub

        team = self.team

        client_id = self.client_id

        user_id = self.user_id

        session_ended = self.session_ended

        signed_out = self.signed_out

        purge = self.purge

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sub": sub,
            }
        )
        if team is not UNSET:
            field_dict["team"] = team
        if client_id is not UNSET:
            field_dict["client_id"] = client_id
        if user_id is not UNSET:
            field_dict["user_id"] = user_id
        if session_ended is not UNSET:
            field_dict["session_ended"] = session_ended
        if signed_out is not UNSET:
            field_dict["signed_out"] = signed_out
        if purge is not UNSET:
            field_dict["purge"] = purge

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sub = d.pop("sub")

        team = d.pop("team", UNSET)

        client_id = d.pop("client_id", UNSET)

        user_id = d.pop("user_id", UNSET)

        session_ended = d.pop("session_ended", UNSET)

        signed_out = d.pop("signed_out", UNSET)

        purge = d.pop("purge", UNSET)

        token_invalid_grant_event_data = cls(
            sub=sub,
            team=team,
            client_id=client_id,
            user_id=user_id,
            session_ended=session_ended,
            signed_out=signed_out,
            purge=purge,
        )

        token_invalid_grant_event_data.additional_properties = d
        return token_invalid_grant_event_data

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
