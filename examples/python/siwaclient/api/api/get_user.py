from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.forbidden_error import ForbiddenError
from ...models.moved_user import MovedUser
from ...models.not_found import NotFound
from ...models.team_refusal import TeamRefusal
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...models.user import User
from ...types import UNSET, Response, Unset


def _get_kwargs(
    apple_sub: str,
    *,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["team"] = team

    params["client_id"] = client_id

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/users/{apple_sub}".format(
            apple_sub=quote(str(apple_sub), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    ForbiddenError
    | MovedUser
    | User
    | NotFound
    | TeamRefusal
    | UnauthorizedError
    | Unavailable
    | None
):
    if response.status_code == 200:

        def _parse_response_200(data: object) -> MovedUser | User:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                response_200_type_0 = User.from_dict(data)

                return response_200_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            response_200_type_1 = MovedUser.from_dict(data)

            return response_200_type_1

        response_200 = _parse_response_200(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = TeamRefusal.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = UnauthorizedError.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ForbiddenError.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = NotFound.from_dict(response.json())

        return response_404

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
    ForbiddenError
    | MovedUser
    | User
    | NotFound
    | TeamRefusal
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
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> Response[
    ForbiddenError
    | MovedUser
    | User
    | NotFound
    | TeamRefusal
    | UnauthorizedError
    | Unavailable
]:
    """the user's record, or where an app transfer moved them

    Args:
        apple_sub (str):
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ForbiddenError | MovedUser | User | NotFound | TeamRefusal | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        apple_sub=apple_sub,
        team=team,
        client_id=client_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> (
    ForbiddenError
    | MovedUser
    | User
    | NotFound
    | TeamRefusal
    | UnauthorizedError
    | Unavailable
    | None
):
    """the user's record, or where an app transfer moved them

    Args:
        apple_sub (str):
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ForbiddenError | MovedUser | User | NotFound | TeamRefusal | UnauthorizedError | Unavailable
    """

    return sync_detailed(
        apple_sub=apple_sub,
        client=client,
        team=team,
        client_id=client_id,
    ).parsed


async def asyncio_detailed(
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> Response[
    ForbiddenError
    | MovedUser
    | User
    | NotFound
    | TeamRefusal
    | UnauthorizedError
    | Unavailable
]:
    """the user's record, or where an app transfer moved them

    Args:
        apple_sub (str):
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ForbiddenError | MovedUser | User | NotFound | TeamRefusal | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        apple_sub=apple_sub,
        team=team,
        client_id=client_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    apple_sub: str,
    *,
    client: AuthenticatedClient,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> (
    ForbiddenError
    | MovedUser
    | User
    | NotFound
    | TeamRefusal
    | UnauthorizedError
    | Unavailable
    | None
):
    """the user's record, or where an app transfer moved them

    Args:
        apple_sub (str):
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ForbiddenError | MovedUser | User | NotFound | TeamRefusal | UnauthorizedError | Unavailable
    """

    return (
        await asyncio_detailed(
            apple_sub=apple_sub,
            client=client,
            team=team,
            client_id=client_id,
        )
    ).parsed
