from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bad_parameter import BadParameter
from ...models.forbidden_error import ForbiddenError
from ...models.too_many_failures_error import TooManyFailuresError
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...models.user_report import UserReport
from ...types import UNSET, Response, Unset


def _get_kwargs(
    apple_sub: str,
    *,
    limit: int | Unset = 1000,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/admin/users/{apple_sub}/history".format(
            apple_sub=quote(str(apple_sub), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | UserReport
    | None
):
    if response.status_code == 200:
        response_200 = UserReport.from_dict(response.json())

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
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | UserReport
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 1000,
) -> Response[
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | UserReport
]:
    """the user's whole story and purges (as `siwa audit user SUB --json`)

    Args:
        apple_sub (str):
        limit (int | Unset):  Default: 1000.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | UserReport]
    """

    kwargs = _get_kwargs(
        apple_sub=apple_sub,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 1000,
) -> (
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | UserReport
    | None
):
    """the user's whole story and purges (as `siwa audit user SUB --json`)

    Args:
        apple_sub (str):
        limit (int | Unset):  Default: 1000.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | UserReport
    """

    return sync_detailed(
        apple_sub=apple_sub,
        client=client,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 1000,
) -> Response[
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | UserReport
]:
    """the user's whole story and purges (as `siwa audit user SUB --json`)

    Args:
        apple_sub (str):
        limit (int | Unset):  Default: 1000.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | UserReport]
    """

    kwargs = _get_kwargs(
        apple_sub=apple_sub,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 1000,
) -> (
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | UserReport
    | None
):
    """the user's whole story and purges (as `siwa audit user SUB --json`)

    Args:
        apple_sub (str):
        limit (int | Unset):  Default: 1000.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | UserReport
    """

    return (
        await asyncio_detailed(
            apple_sub=apple_sub,
            client=client,
            limit=limit,
        )
    ).parsed
