from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.cursor_expired import CursorExpired
from ...models.events_feed_refusal import EventsFeedRefusal
from ...models.events_page import EventsPage
from ...models.forbidden_error import ForbiddenError
from ...models.team_refusal import TeamRefusal
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["after"] = after

    params["limit"] = limit

    params["team"] = team

    params["client_id"] = client_id

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/events",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    CursorExpired
    | EventsFeedRefusal
    | TeamRefusal
    | EventsPage
    | ForbiddenError
    | UnauthorizedError
    | Unavailable
    | None
):
    if response.status_code == 200:
        response_200 = EventsPage.from_dict(response.json())

        return response_200

    if response.status_code == 400:

        def _parse_response_400(data: object) -> EventsFeedRefusal | TeamRefusal:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                response_400_type_0 = EventsFeedRefusal.from_dict(data)

                return response_400_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            response_400_type_1 = TeamRefusal.from_dict(data)

            return response_400_type_1

        response_400 = _parse_response_400(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = UnauthorizedError.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ForbiddenError.from_dict(response.json())

        return response_403

    if response.status_code == 410:
        response_410 = CursorExpired.from_dict(response.json())

        return response_410

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
    CursorExpired
    | EventsFeedRefusal
    | TeamRefusal
    | EventsPage
    | ForbiddenError
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
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> Response[
    CursorExpired
    | EventsFeedRefusal
    | TeamRefusal
    | EventsPage
    | ForbiddenError
    | UnauthorizedError
    | Unavailable
]:
    """the app events in order, after a cursor - the webhook's ids and bodies, for a backend catching up

     The events of the team (`team`, `client_id`, or the one team siwa
    serves), oldest first, each with its webhook-id (`id`) and, as
    `event`, exactly the body its webhook delivery has. Ask again with
    `after` set to `next` while `has_more` is true; then you are caught
    up. Without `after`, from the oldest event recorded within
    SIWA_EVENTS_FEED_RETENTION_DAYS (30).

    Args:
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CursorExpired | EventsFeedRefusal | TeamRefusal | EventsPage | ForbiddenError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        after=after,
        limit=limit,
        team=team,
        client_id=client_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> (
    CursorExpired
    | EventsFeedRefusal
    | TeamRefusal
    | EventsPage
    | ForbiddenError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the app events in order, after a cursor - the webhook's ids and bodies, for a backend catching up

     The events of the team (`team`, `client_id`, or the one team siwa
    serves), oldest first, each with its webhook-id (`id`) and, as
    `event`, exactly the body its webhook delivery has. Ask again with
    `after` set to `next` while `has_more` is true; then you are caught
    up. Without `after`, from the oldest event recorded within
    SIWA_EVENTS_FEED_RETENTION_DAYS (30).

    Args:
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CursorExpired | EventsFeedRefusal | TeamRefusal | EventsPage | ForbiddenError | UnauthorizedError | Unavailable
    """

    return sync_detailed(
        client=client,
        after=after,
        limit=limit,
        team=team,
        client_id=client_id,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> Response[
    CursorExpired
    | EventsFeedRefusal
    | TeamRefusal
    | EventsPage
    | ForbiddenError
    | UnauthorizedError
    | Unavailable
]:
    """the app events in order, after a cursor - the webhook's ids and bodies, for a backend catching up

     The events of the team (`team`, `client_id`, or the one team siwa
    serves), oldest first, each with its webhook-id (`id`) and, as
    `event`, exactly the body its webhook delivery has. Ask again with
    `after` set to `next` while `has_more` is true; then you are caught
    up. Without `after`, from the oldest event recorded within
    SIWA_EVENTS_FEED_RETENTION_DAYS (30).

    Args:
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CursorExpired | EventsFeedRefusal | TeamRefusal | EventsPage | ForbiddenError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        after=after,
        limit=limit,
        team=team,
        client_id=client_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    team: str | Unset = UNSET,
    client_id: str | Unset = UNSET,
) -> (
    CursorExpired
    | EventsFeedRefusal
    | TeamRefusal
    | EventsPage
    | ForbiddenError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the app events in order, after a cursor - the webhook's ids and bodies, for a backend catching up

     The events of the team (`team`, `client_id`, or the one team siwa
    serves), oldest first, each with its webhook-id (`id`) and, as
    `event`, exactly the body its webhook delivery has. Ask again with
    `after` set to `next` while `has_more` is true; then you are caught
    up. Without `after`, from the oldest event recorded within
    SIWA_EVENTS_FEED_RETENTION_DAYS (30).

    Args:
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        team (str | Unset):
        client_id (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CursorExpired | EventsFeedRefusal | TeamRefusal | EventsPage | ForbiddenError | UnauthorizedError | Unavailable
    """

    return (
        await asyncio_detailed(
            client=client,
            after=after,
            limit=limit,
            team=team,
            client_id=client_id,
        )
    ).parsed
