from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.history_entry import HistoryEntry
    from ..models.purge_latency import PurgeLatency


T = TypeVar("T", bound="UserReport")


@_attrs_define
class UserReport:
    """
    Attributes:
        apple_sub (str):
        history (list[HistoryEntry]):
        truncated (bool): there are more rows than `limit`
        purges (list[PurgeLatency]):
        apple_team (str | Unset): absent - the sub's rows in every team
    """

    apple_sub: str
    history: list[HistoryEntry]
    truncated: bool
    purges: list[PurgeLatency]
    apple_team: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        apple_sub = self.apple_sub

        history = []
        for history_item_data in self.history:
            history_item = history_item_data.to_dict()
            history.append(history_item)

        truncated = self.truncated

        purges = []
        for purges_item_data in self.purges:
            purges_item = purges_item_data.to_dict()
            purges.append(purges_item)

        apple_team = self.apple_team

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "apple_sub": apple_sub,
                "history": history,
                "truncated": truncated,
                "purges": purges,
            }
        )
        if apple_team is not UNSET:
            field_dict["apple_team"] = apple_team

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.history_entry import HistoryEntry
        from ..models.purge_latency import PurgeLatency

        d = dict(src_dict)
        apple_sub = d.pop("apple_sub")

        history = []
        _history = d.pop("history")
        for history_item_data in _history:
            history_item = HistoryEntry.from_dict(history_item_data)

            history.append(history_item)

        truncated = d.pop("truncated")

        purges = []
        _purges = d.pop("purges")
        for purges_item_data in _purges:
            purges_item = PurgeLatency.from_dict(purges_item_data)

            purges.append(purges_item)

        apple_team = d.pop("apple_team", UNSET)

        user_report = cls(
            apple_sub=apple_sub,
            history=history,
            truncated=truncated,
            purges=purges,
            apple_team=apple_team,
        )

        user_report.additional_properties = d
        return user_report

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
