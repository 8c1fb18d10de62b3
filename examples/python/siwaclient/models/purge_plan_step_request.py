from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PurgePlanStepRequest")


@_attrs_define
class PurgePlanStepRequest:
    """What a purge plan's `http` step POSTs to its URL (docs/architecture.md,
    "The purge plan"), signed the Standard Webhooks way with the step's
    secret, `webhook-id: siwa-job-<job id>-<step name>` the same on every
    retry. Only a 2xx counts; redirects are not followed.

        Attributes:
            job_id (int): the purge job
            apple_sub (str):
            apple_team (str): the team whose sub apple_sub is
            user_id (int | None): siwa's users.id, null if siwa never saw the user
            event_type (None | str): what asked for the purge (Apple's event type such as `account-delete`, `app-deletion`
                for an in-app deletion, ...); null for a job enqueued by hand
    """

    job_id: int
    apple_sub: str
    apple_team: str
    user_id: int | None
    event_type: None | str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        job_id = self.job_id

        apple_sub = self.apple_sub

        apple_team = self.apple_team

        user_id: int | None
        user_id = self.user_id

        event_type: None | str
        event_type = self.event_type

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "job_id": job_id,
                "apple_sub": apple_sub,
                "apple_team": apple_team,
                "user_id": user_id,
                "event_type": event_type,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job_id = d.pop("job_id")

        apple_sub = d.pop("apple_sub")

        apple_team = d.pop("apple_team")

        def _parse_user_id(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        user_id = _parse_user_id(d.pop("user_id"))

        def _parse_event_type(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        event_type = _parse_event_type(d.pop("event_type"))

        purge_plan_step_request = cls(
            job_id=job_id,
            apple_sub=apple_sub,
            apple_team=apple_team,
            user_id=user_id,
            event_type=event_type,
        )

        purge_plan_step_request.additional_properties = d
        return purge_plan_step_request

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
