from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bad_parameter import BadParameter
from ...models.job_answer import JobAnswer
from ...models.job_change_forbidden_error import JobChangeForbiddenError
from ...models.job_conflict_error import JobConflictError
from ...models.not_found import NotFound
from ...models.run_job_now_body import RunJobNowBody
from ...models.too_many_failures_error import TooManyFailuresError
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: int,
    *,
    body: RunJobNowBody | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/admin/jobs/{id}/run-now".format(
            id=quote(str(id), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["data"] = body.to_dict()
    headers["Content-Type"] = "application/x-www-form-urlencoded"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    Any
    | BadParameter
    | JobAnswer
    | JobChangeForbiddenError
    | JobConflictError
    | NotFound
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    if response.status_code == 200:
        response_200 = JobAnswer.from_dict(response.json())

        return response_200

    if response.status_code == 303:
        response_303 = cast(Any, None)
        return response_303

    if response.status_code == 400:
        response_400 = BadParameter.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = UnauthorizedError.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = JobChangeForbiddenError.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = NotFound.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = JobConflictError.from_dict(response.json())

        return response_409

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
    Any
    | BadParameter
    | JobAnswer
    | JobChangeForbiddenError
    | JobConflictError
    | NotFound
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
    id: int,
    *,
    client: AuthenticatedClient,
    body: RunJobNowBody | Unset = UNSET,
) -> Response[
    Any
    | BadParameter
    | JobAnswer
    | JobChangeForbiddenError
    | JobConflictError
    | NotFound
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """run a waiting job now (as `siwa jobs run-now`)

    Args:
        id (int):
        body (RunJobNowBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | BadParameter | JobAnswer | JobChangeForbiddenError | JobConflictError | NotFound | TooManyFailuresError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: int,
    *,
    client: AuthenticatedClient,
    body: RunJobNowBody | Unset = UNSET,
) -> (
    Any
    | BadParameter
    | JobAnswer
    | JobChangeForbiddenError
    | JobConflictError
    | NotFound
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """run a waiting job now (as `siwa jobs run-now`)

    Args:
        id (int):
        body (RunJobNowBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | BadParameter | JobAnswer | JobChangeForbiddenError | JobConflictError | NotFound | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    id: int,
    *,
    client: AuthenticatedClient,
    body: RunJobNowBody | Unset = UNSET,
) -> Response[
    Any
    | BadParameter
    | JobAnswer
    | JobChangeForbiddenError
    | JobConflictError
    | NotFound
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """run a waiting job now (as `siwa jobs run-now`)

    Args:
        id (int):
        body (RunJobNowBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | BadParameter | JobAnswer | JobChangeForbiddenError | JobConflictError | NotFound | TooManyFailuresError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: int,
    *,
    client: AuthenticatedClient,
    body: RunJobNowBody | Unset = UNSET,
) -> (
    Any
    | BadParameter
    | JobAnswer
    | JobChangeForbiddenError
    | JobConflictError
    | NotFound
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """run a waiting job now (as `siwa jobs run-now`)

    Args:
        id (int):
        body (RunJobNowBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | BadParameter | JobAnswer | JobChangeForbiddenError | JobConflictError | NotFound | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
