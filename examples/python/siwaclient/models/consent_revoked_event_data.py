from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.consent_revoked_event_data_source import ConsentRevokedEventDataSource
from ..types import UNSET, Unset

T = TypeVar("T", bound="ConsentRevokedEventData")


@_attrs_define
class ConsentRevokedEventData:
    """
    Attributes:
        sub (str):
        source (ConsentRevokedEventDataSource): `apple`, or `invalid_grant` on rows written before 0.10
        team (str | Unset):
        client_id (str | Unset):
        purge (bool | Unset):
        purge_after (datetime.datetime | Unset):
    """

    sub: str
    source: ConsentRevokedEventDataSource
    team: str | Unset = UNSET
    client_id: str | Unset = UNSET
    purge: bool | Unset = UNSET
    purge_after: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sub = self.sub

        source = self.source.value

        team = self.team

        client_id = self.client_id

        purge = self.purge

        purge_after: str | Unset = UNSET
        if not isinstance(self.purge_after, Unset):
            purge_after = self.purge_after.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sub": sub,
                "source": source,
            }
        )
        if team is not UNSET:
            field_dict["team"] = team
        if client_id is not UNSET:
            field_dict["client_id"] = client_id
        if purge is not UNSET:
            field_dict["purge"] = purge
        if purge_after is not UNSET:
            field_dict["purge_after"] = purge_after

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sub = d.pop("sub")

        source = ConsentRevokedEventDataSource(d.pop("source"))

        team = d.pop("team", UNSET)

        client_id = d.pop("client_id", UNSET)

        purge = d.pop("purge", UNSET)

        _purge_after = d.pop("purge_after", UNSET)
        purge_after: datetime.datetime | Unset
        if isinstance(_purge_after, Unset):
            purge_after = UNSET
        else:
            purge_after = datetime.datetime.fromisoformat(_purge_after)

        consent_revoked_event_data = cls(
            sub=sub,
            source=source,
            team=team,
            client_id=client_id,
            purge=purge,
            purge_after=purge_after,
        )

        consent_revoked_event_data.additional_properties = d
        return consent_revoked_event_data

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
