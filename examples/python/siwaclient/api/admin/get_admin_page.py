from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bad_parameter import BadParameter
from ...models.forbidden_error import ForbiddenError
from ...models.get_admin_page_notice import GetAdminPageNotice
from ...models.too_many_failures_error import TooManyFailuresError
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    days: int | Unset = 14,
    sub: str | Unset = UNSET,
    notice: GetAdminPageNotice | Unset = UNSET,
    job: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["days"] = days

    params["sub"] = sub

    json_notice: str | Unset = UNSET
    if not isinstance(notice, Unset):
        json_notice = notice.value

    params["notice"] = json_notice

    params["job"] = job

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/admin",
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
    | str
    | None
):
    if response.status_code == 200:
        response_200 = response.text
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
    | str
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
    days: int | Unset = 14,
    sub: str | Unset = UNSET,
    notice: GetAdminPageNotice | Unset = UNSET,
    job: int | Unset = UNSET,
) -> Response[
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | str
]:
    """the admin page (server-rendered HTML, no script)

    Args:
        days (int | Unset):  Default: 14.
        sub (str | Unset):
        notice (GetAdminPageNotice | Unset):
        job (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | str]
    """

    kwargs = _get_kwargs(
        days=days,
        sub=sub,
        notice=notice,
        job=job,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    days: int | Unset = 14,
    sub: str | Unset = UNSET,
    notice: GetAdminPageNotice | Unset = UNSET,
    job: int | Unset = UNSET,
) -> (
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | str
    | None
):
    """the admin page (server-rendered HTML, no script)

    Args:
        days (int | Unset):  Default: 14.
        sub (str | Unset):
        notice (GetAdminPageNotice | Unset):
        job (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | str
    """

    return sync_detailed(
        client=client,
        days=days,
        sub=sub,
        notice=notice,
        job=job,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    days: int | Unset = 14,
    sub: str | Unset = UNSET,
    notice: GetAdminPageNotice | Unset = UNSET,
    job: int | Unset = UNSET,
) -> Response[
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | str
]:
    """the admin page (server-rendered HTML, no script)

    Args:
        days (int | Unset):  Default: 14.
        sub (str | Unset):
        notice (GetAdminPageNotice | Unset):
        job (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | str]
    """

    kwargs = _get_kwargs(
        days=days,
        sub=sub,
        notice=notice,
        job=job,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    days: int | Unset = 14,
    sub: str | Unset = UNSET,
    notice: GetAdminPageNotice | Unset = UNSET,
    job: int | Unset = UNSET,
) -> (
    BadParameter
    | ForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | str
    | None
):
    """the admin page (server-rendered HTML, no script)

    Args:
        days (int | Unset):  Default: 14.
        sub (str | Unset):
        notice (GetAdminPageNotice | Unset):
        job (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | ForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable | str
    """

    return (
        await asyncio_detailed(
            client=client,
            days=days,
            sub=sub,
            notice=notice,
            job=job,
        )
    ).parsed
