from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.history_entry_source import HistoryEntrySource
from ..types import UNSET, Unset

T = TypeVar("T", bound="HistoryEntry")


@_attrs_define
class HistoryEntry:
    """
    Attributes:
        at (datetime.datetime):
        source (HistoryEntrySource):
        action (str):
        details (Any): any JSON value
        apple_team (str | Unset):
    """

    at: datetime.datetime
    source: HistoryEntrySource
    action: str
    details: Any
    apple_team: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        source = self.source.value

        action = self.action

        details = self.details

        apple_team = self.apple_team

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "source": source,
                "action": action,
                "details": details,
            }
        )
        if apple_team is not UNSET:
            field_dict["apple_team"] = apple_team

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        source = HistoryEntrySource(d.pop("source"))

        action = d.pop("action")

        details = d.pop("details")

        apple_team = d.pop("apple_team", UNSET)

        history_entry = cls(
            at=at,
            source=source,
            action=action,
            details=details,
            apple_team=apple_team,
        )

        history_entry.additional_properties = d
        return history_entry

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
