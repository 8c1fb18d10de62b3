from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.attention_item import AttentionItem
    from ..models.day_summary import DaySummary
    from ..models.waiting_purge import WaitingPurge


T = TypeVar("T", bound="AuditSummary")


@_attrs_define
class AuditSummary:
    """
    Attributes:
        purge_sla_hours (int):
        days (list[DaySummary]): oldest first
        attention (list[AttentionItem]):
        waiting (list[WaitingPurge]):
    """

    purge_sla_hours: int
    days: list[DaySummary]
    attention: list[AttentionItem]
    waiting: list[WaitingPurge]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        purge_sla_hours = self.purge_sla_hours

        days = []
        for days_item_data in self.days:
            days_item = days_item_data.to_dict()
            days.append(days_item)

        attention = []
        for attention_item_data in self.attention:
            attention_item = attention_item_data.to_dict()
            attention.append(attention_item)

        waiting = []
        for waiting_item_data in self.waiting:
            waiting_item = waiting_item_data.to_dict()
            waiting.append(waiting_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "purge_sla_hours": purge_sla_hours,
                "days": days,
                "attention": attention,
                "waiting": waiting,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.attention_item import AttentionItem
        from ..models.day_summary import DaySummary
        from ..models.waiting_purge import WaitingPurge

        d = dict(src_dict)
        purge_sla_hours = d.pop("purge_sla_hours")

        days = []
        _days = d.pop("days")
        for days_item_data in _days:
            days_item = DaySummary.from_dict(days_item_data)

            days.append(days_item)

        attention = []
        _attention = d.pop("attention")
        for attention_item_data in _attention:
            attention_item = AttentionItem.from_dict(attention_item_data)

            attention.append(attention_item)

        waiting = []
        _waiting = d.pop("waiting")
        for waiting_item_data in _waiting:
            waiting_item = WaitingPurge.from_dict(waiting_item_data)

            waiting.append(waiting_item)

        audit_summary = cls(
            purge_sla_hours=purge_sla_hours,
            days=days,
            attention=attention,
            waiting=waiting,
        )

        audit_summary.additional_properties = d
        return audit_summary

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
