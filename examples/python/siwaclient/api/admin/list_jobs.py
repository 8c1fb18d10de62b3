from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bad_parameter import BadParameter
from ...models.forbidden_error import ForbiddenError
from ...models.job_kind import JobKind
from ...models.job_list import JobList
from ...models.job_state import JobState
from ...models.too_many_failures_error import TooManyFailuresError
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    state: JobState | Unset = UNSET,
    kind: JobKind | Unset = UNSET,
    limit: int | Unset = 100,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_state: str | Unset = UNSET
    if not isinstance(state, Unset):
        json_state = state.value

    params["state"] = json_state

    json_kind: str | Unset = UNSET
    if not isinstance(kind, Unset):
        json_kind = kind.value

    params["kind"] = json_kind

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/admin/jobs",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    BadParameter
    | ForbiddenError
    | JobList
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    if response.status_code == 200:
        response_200 = JobList.from_dict(response.json())

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
    BadParameter
    | ForbiddenError
    | JobList
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
    state: JobState | Unset = UNSET,
    kind: JobKind | Unset = UNSET,
    limit: int | Unset = 100,
) -> Response[
    BadParameter
    | ForbiddenError
    | JobList
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """the jobs (as `siwa jobs list --json`)

    Args:
        state (JobState | Unset):
        kind (JobKind | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | ForbiddenError | JobList | TooManyFailuresError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        state=state,
        kind=kind,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    state: JobState | Unset = UNSET,
    kind: JobKind | Unset = UNSET,
    limit: int | Unset = 100,
) -> (
    BadParameter
    | ForbiddenError
    | JobList
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the jobs (as `siwa jobs list --json`)

    Args:
        state (JobState | Unset):
        kind (JobKind | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | ForbiddenError | JobList | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return sync_detailed(
        client=client,
        state=state,
        kind=kind,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    state: JobState | Unset = UNSET,
    kind: JobKind | Unset = UNSET,
    limit: int | Unset = 100,
) -> Response[
    BadParameter
    | ForbiddenError
    | JobList
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """the jobs (as `siwa jobs list --json`)

    Args:
        state (JobState | Unset):
        kind (JobKind | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | ForbiddenError | JobList | TooManyFailuresError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        state=state,
        kind=kind,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    state: JobState | Unset = UNSET,
    kind: JobKind | Unset = UNSET,
    limit: int | Unset = 100,
) -> (
    BadParameter
    | ForbiddenError
    | JobList
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the jobs (as `siwa jobs list --json`)

    Args:
        state (JobState | Unset):
        kind (JobKind | Unset):
        limit (int | Unset):  Default: 100.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | ForbiddenError | JobList | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return (
        await asyncio_detailed(
            client=client,
            state=state,
            kind=kind,
            limit=limit,
        )
    ).parsed
