from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.user_purge_type_0_state import UserPurgeType0State

T = TypeVar("T", bound="UserPurgeType0")


@_attrs_define
class UserPurgeType0:
    """the user's latest purge, null when there is none

    Attributes:
        job_id (int):
        state (UserPurgeType0State): the job's state (unknown - none read)
        waiting (bool): a consent revocation's purge in its grace delay, due at run_at; a sign-in before then cancels it
        run_at (datetime.datetime | None):
    """

    job_id: int
    state: UserPurgeType0State
    waiting: bool
    run_at: datetime.datetime | None
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        job_id = self.job_id

        state = self.state.value

        waiting = self.waiting

        run_at: None | str
        if isinstance(self.run_at, datetime.datetime):
            run_at = self.run_at.isoformat()
        else:
            run_at = self.run_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "job_id": job_id,
                "state": state,
                "waiting": waiting,
                "run_at": run_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job_id = d.pop("job_id")

        state = UserPurgeType0State(d.pop("state"))

        waiting = d.pop("waiting")

        def _parse_run_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                run_at_type_0 = datetime.datetime.fromisoformat(data)

                return run_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        run_at = _parse_run_at(d.pop("run_at"))

        user_purge_type_0 = cls(
            job_id=job_id,
            state=state,
            waiting=waiting,
            run_at=run_at,
        )

        user_purge_type_0.additional_properties = d
        return user_purge_type_0

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
