from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.day_summary_notifications_by_type import DaySummaryNotificationsByType
    from ..models.day_summary_rejections_by_reason import DaySummaryRejectionsByReason


T = TypeVar("T", bound="DaySummary")


@_attrs_define
class DaySummary:
    """
    Attributes:
        day (datetime.date): the UTC day
        notifications (int):
        notifications_by_type (DaySummaryNotificationsByType):
        rejections (int):
        rejections_by_reason (DaySummaryRejectionsByReason):
        purges_completed (int):
        purges_failed (int):
        purge_p50_seconds (float | Unset):
        purge_p95_seconds (float | Unset):
    """

    day: datetime.date
    notifications: int
    notifications_by_type: DaySummaryNotificationsByType
    rejections: int
    rejections_by_reason: DaySummaryRejectionsByReason
    purges_completed: int
    purges_failed: int
    purge_p50_seconds: float | Unset = UNSET
    purge_p95_seconds: float | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        day = self.day.isoformat()

        notifications = self.notifications

        notifications_by_type = self.notifications_by_type.to_dict()

        rejections = self.rejections

        rejections_by_reason = self.rejections_by_reason.to_dict()

        purges_completed = self.purges_completed

        purges_failed = self.purges_failed

        purge_p50_seconds = self.purge_p50_seconds

        purge_p95_seconds = self.purge_p95_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "day": day,
                "notifications": notifications,
                "notifications_by_type": notifications_by_type,
                "rejections": rejections,
                "rejections_by_reason": rejections_by_reason,
                "purges_completed": purges_completed,
                "purges_failed": purges_failed,
            }
        )
        if purge_p50_seconds is not UNSET:
            field_dict["purge_p50_seconds"] = purge_p50_seconds
        if purge_p95_seconds is not UNSET:
            field_dict["purge_p95_seconds"] = purge_p95_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.day_summary_notifications_by_type import (
            DaySummaryNotificationsByType,
        )
        from ..models.day_summary_rejections_by_reason import (
            DaySummaryRejectionsByReason,
        )

        d = dict(src_dict)
        day = datetime.date.fromisoformat(d.pop("day"))

        notifications = d.pop("notifications")

        notifications_by_type = DaySummaryNotificationsByType.from_dict(
            d.pop("notifications_by_type")
        )

        rejections = d.pop("rejections")

        rejections_by_reason = DaySummaryRejectionsByReason.from_dict(
            d.pop("rejections_by_reason")
        )

        purges_completed = d.pop("purges_completed")

        purges_failed = d.pop("purges_failed")

        purge_p50_seconds = d.pop("purge_p50_seconds", UNSET)

        purge_p95_seconds = d.pop("purge_p95_seconds", UNSET)

        day_summary = cls(
            day=day,
            notifications=notifications,
            notifications_by_type=notifications_by_type,
            rejections=rejections,
            rejections_by_reason=rejections_by_reason,
            purges_completed=purges_completed,
            purges_failed=purges_failed,
            purge_p50_seconds=purge_p50_seconds,
            purge_p95_seconds=purge_p95_seconds,
        )

        day_summary.additional_properties = d
        return day_summary

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
