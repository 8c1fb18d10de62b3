from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="AuditEntry")


@_attrs_define
class AuditEntry:
    """one row of siwa.audit_log

    Attributes:
        seq (int):
        occurred_at (datetime.datetime):
        actor (str):
        action (str):
        details (Any): any JSON value
        apple_sub (str | Unset):
        apple_team (str | Unset): absent on rows written before sql/024
    """

    seq: int
    occurred_at: datetime.datetime
    actor: str
    action: str
    details: Any
    apple_sub: str | Unset = UNSET
    apple_team: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        seq = self.seq

        occurred_at = self.occurred_at.isoformat()

        actor = self.actor

        action = self.action

        details = self.details

        apple_sub = self.apple_sub

        apple_team = self.apple_team

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "seq": seq,
                "occurred_at": occurred_at,
                "actor": actor,
                "action": action,
                "details": details,
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
        seq = d.pop("seq")

        occurred_at = datetime.datetime.fromisoformat(d.pop("occurred_at"))

        actor = d.pop("actor")

        action = d.pop("action")

        details = d.pop("details")

        apple_sub = d.pop("apple_sub", UNSET)

        apple_team = d.pop("apple_team", UNSET)

        audit_entry = cls(
            seq=seq,
            occurred_at=occurred_at,
            actor=actor,
            action=action,
            details=details,
            apple_sub=apple_sub,
            apple_team=apple_team,
        )

        audit_entry.additional_properties = d
        return audit_entry

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
