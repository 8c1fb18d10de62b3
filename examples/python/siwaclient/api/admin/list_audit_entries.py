from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.audit_log import AuditLog
from ...models.bad_parameter import BadParameter
from ...models.forbidden_error import ForbiddenError
from ...models.too_many_failures_error import TooManyFailuresError
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    sub: str | Unset = UNSET,
    action: str | Unset = UNSET,
    actor: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    before: int | Unset = UNSET,
    limit: int | Unset = 100,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["sub"] = sub

    params["action"] = action

    params["actor"] = actor

    params["since"] = since

    params["until"] = until

    params["before"] = before

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/admin/audit",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    AuditLog
    | BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    if response.status_code == 200:
        response_200 = AuditLog.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = BadParameter.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = UnauthorizedError.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ForbiddenError.from_dict(response.json())

        return response_403

    if response.status_code == 429:
        response_429 = TooManyFailuresError.from_dict(response.json())

        return response_429

    if response.status_code == 503:
        response_503 = Unavailable.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    AuditLog
    | BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    sub: str | Unset = UNSET,
    action: str | Unset = UNSET,
    actor: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    before: int | Unset = UNSET,
    limit: int | Unset = 100,
) -> Response[
    AuditLog
    | BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """the audit trail, newest first (as `siwa audit --json`)

    Args:
        sub (str | Unset):
        action (str | Unset):
        actor (str | Unset):
        since (str | Unset):
        until (str | Unset):
        before (int | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AuditLog | BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        sub=sub,
        action=action,
        actor=actor,
        since=since,
        until=until,
        before=before,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    sub: str | Unset = UNSET,
    action: str | Unset = UNSET,
    actor: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    before: int | Unset = UNSET,
    limit: int | Unset = 100,
) -> (
    AuditLog
    | BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the audit trail, newest first (as `siwa audit --json`)

    Args:
        sub (str | Unset):
        action (str | Unset):
        actor (str | Unset):
        since (str | Unset):
        until (str | Unset):
        before (int | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AuditLog | BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return sync_detailed(
        client=client,
        sub=sub,
        action=action,
        actor=actor,
        since=since,
        until=until,
        before=before,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    sub: str | Unset = UNSET,
    action: str | Unset = UNSET,
    actor: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    before: int | Unset = UNSET,
    limit: int | Unset = 100,
) -> Response[
    AuditLog
    | BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """the audit trail, newest first (as `siwa audit --json`)

    Args:
        sub (str | Unset):
        action (str | Unset):
        actor (str | Unset):
        since (str | Unset):
        until (str | Unset):
        before (int | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AuditLog | BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        sub=sub,
        action=action,
        actor=actor,
        since=since,
        until=until,
        before=before,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    sub: str | Unset = UNSET,
    action: str | Unset = UNSET,
    actor: str | Unset = UNSET,
    since: str | Unset = UNSET,
    until: str | Unset = UNSET,
    before: int | Unset = UNSET,
    limit: int | Unset = 100,
) -> (
    AuditLog
    | BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the audit trail, newest first (as `siwa audit --json`)

    Args:
        sub (str | Unset):
        action (str | Unset):
        actor (str | Unset):
        since (str | Unset):
        until (str | Unset):
        before (int | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AuditLog | BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return (
        await asyncio_detailed(
            client=client,
            sub=sub,
            action=action,
            actor=actor,
            since=since,
            until=until,
            before=before,
            limit=limit,
        )
    ).parsed
