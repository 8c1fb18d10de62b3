from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.job_state import JobState
from ..types import UNSET, Unset

T = TypeVar("T", bound="Job")


@_attrs_define
class Job:
    """a job as `siwa jobs --json` shows it; unset fields left out, times to the second

    Attributes:
        id (int):
        kind (str):
        state (JobState):
        attempt (int):
        max_attempts (int):
        run_at (datetime.datetime):
        created_at (datetime.datetime):
        errors (Any): any JSON value
        steps_done (Any): any JSON value
        apple_sub (str | Unset):
        apple_team (str | Unset):
        event_type (str | Unset):
        attempted_at (datetime.datetime | Unset):
        finalized_at (datetime.datetime | Unset):
        locked_by (str | Unset):
        locked_until (datetime.datetime | Unset):
    """

    id: int
    kind: str
    state: JobState
    attempt: int
    max_attempts: int
    run_at: datetime.datetime
    created_at: datetime.datetime
    errors: Any
    steps_done: Any
    apple_sub: str | Unset = UNSET
    apple_team: str | Unset = UNSET
    event_type: str | Unset = UNSET
    attempted_at: datetime.datetime | Unset = UNSET
    finalized_at: datetime.datetime | Unset = UNSET
    locked_by: str | Unset = UNSET
    locked_until: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        kind = self.kind

        state = self.state.value

        attempt = self.attempt

        max_attempts = self.max_attempts

        run_at = self.run_at.isoformat()

        created_at = self.created_at.isoformat()

        errors = self.errors

        steps_done = self.steps_done

        apple_sub = self.apple_sub

        apple_team = self.apple_team

        event_type = self.event_type

        attempted_at: str | Unset = UNSET
        if not isinstance(self.attempted_at, Unset):
            attempted_at = self.attempted_at.isoformat()

        finalized_at: str | Unset = UNSET
        if not isinstance(self.finalized_at, Unset):
            finalized_at = self.finalized_at.isoformat()

        locked_by = self.locked_by

        locked_until: str | Unset = UNSET
        if not isinstance(self.locked_until, Unset):
            locked_until = self.locked_until.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "kind": kind,
                "state": state,
                "attempt": attempt,
                "max_attempts": max_attempts,
                "run_at": run_at,
                "created_at": created_at,
                "errors": errors,
                "steps_done": steps_done,
            }
        )
        if apple_sub is not UNSET:
            field_dict["apple_sub"] = apple_sub
        if apple_team is not UNSET:
            field_dict["apple_team"] = apple_team
        if event_type is not UNSET:
            field_dict["event_type"] = event_type
        if attempted_at is not UNSET:
            field_dict["attempted_at"] = attempted_at
        if finalized_at is not UNSET:
            field_dict["finalized_at"] = finalized_at
        if locked_by is not UNSET:
            field_dict["locked_by"] = locked_by
        if locked_until is not UNSET:
            field_dict["locked_until"] = locked_until

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        kind = d.pop("kind")

        state = JobState(d.pop("state"))

        attempt = d.pop("attempt")

        max_attempts = d.pop("max_attempts")

        run_at = datetime.datetime.fromisoformat(d.pop("run_at"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        errors = d.pop("errors")

        steps_done = d.pop("steps_done")

        apple_sub = d.pop("apple_sub", UNSET)

        apple_team = d.pop("apple_team", UNSET)

        event_type = d.pop("event_type", UNSET)

        _attempted_at = d.pop("attempted_at", UNSET)
        attempted_at: datetime.datetime | Unset
        if isinstance(_attempted_at, Unset):
            attempted_at = UNSET
        else:
            attempted_at = datetime.datetime.fromisoformat(_attempted_at)

        _finalized_at = d.pop("finalized_at", UNSET)
        finalized_at: datetime.datetime | Unset
        if isinstance(_finalized_at, Unset):
            finalized_at = UNSET
        else:
            finalized_at = datetime.datetime.fromisoformat(_finalized_at)

        locked_by = d.pop("locked_by", UNSET)

        _locked_until = d.pop("locked_until", UNSET)
        locked_until: datetime.datetime | Unset
        if isinstance(_locked_until, Unset):
            locked_until = UNSET
        else:
            locked_until = datetime.datetime.fromisoformat(_locked_until)

        job = cls(
            id=id,
            kind=kind,
            state=state,
            attempt=attempt,
            max_attempts=max_attempts,
            run_at=run_at,
            created_at=created_at,
            errors=errors,
            steps_done=steps_done,
            apple_sub=apple_sub,
            apple_team=apple_team,
            event_type=event_type,
            attempted_at=attempted_at,
            finalized_at=finalized_at,
            locked_by=locked_by,
            locked_until=locked_until,
        )

        job.additional_properties = d
        return job

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
