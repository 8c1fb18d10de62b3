from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.feed_event import FeedEvent


T = TypeVar("T", bound="EventsPage")


@_attrs_define
class EventsPage:
    """a page of GET /v1/events

    Attributes:
        events (list[FeedEvent]):
        has_more (bool): more events wait after this page; ask again with `after` = `next`
        next_ (str | Unset): the cursor of the next page - the last event's id, else the `after` asked; absent only when
            the feed holds no event and no `after` was given
    """

    events: list[FeedEvent]
    has_more: bool
    next_: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        events = []
        for events_item_data in self.events:
            events_item = events_item_data.to_dict()
            events.append(events_item)

        has_more = self.has_more

        next_ = self.next_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "events": events,
                "has_more": has_more,
            }
        )
        if next_ is not UNSET:
            field_dict["next"] = next_

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.feed_event import FeedEvent

        d = dict(src_dict)
        events = []
        _events = d.pop("events")
        for events_item_data in _events:
            events_item = FeedEvent.from_dict(events_item_data)

            events.append(events_item)

        has_more = d.pop("has_more")

        next_ = d.pop("next", UNSET)

        events_page = cls(
            events=events,
            has_more=has_more,
            next_=next_,
        )

        events_page.additional_properties = d
        return events_page

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
