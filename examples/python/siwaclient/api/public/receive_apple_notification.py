from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.accepted_notification import AcceptedNotification
from ...models.apple_notification_body import AppleNotificationBody
from ...models.body_too_large import BodyTooLarge
from ...models.notification_refusal import NotificationRefusal
from ...models.unavailable import Unavailable
from ...types import Response


def _get_kwargs(
    *,
    body: AppleNotificationBody,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/apple/notifications",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable | None:
    if response.status_code == 200:
        response_200 = AcceptedNotification.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = NotificationRefusal.from_dict(response.json())

        return response_400

    if response.status_code == 413:
        response_413 = BodyTooLarge.from_dict(response.json())

        return response_413

    if response.status_code == 503:
        response_503 = Unavailable.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: AppleNotificationBody,
) -> Response[AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable]:
    """Apple's server-to-server notification

     Apple's body `{"payload": "<JWS>"}`. 200 only after the commit; each
    refused body leaves a row in `siwa.rejected_notifications`. A body
    over `SIWA_MAX_BODY_BYTES` is refused 413 before it is read, with
    `Connection: close`.

    Args:
        body (AppleNotificationBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: AppleNotificationBody,
) -> AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable | None:
    """Apple's server-to-server notification

     Apple's body `{"payload": "<JWS>"}`. 200 only after the commit; each
    refused body leaves a row in `siwa.rejected_notifications`. A body
    over `SIWA_MAX_BODY_BYTES` is refused 413 before it is read, with
    `Connection: close`.

    Args:
        body (AppleNotificationBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: AppleNotificationBody,
) -> Response[AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable]:
    """Apple's server-to-server notification

     Apple's body `{"payload": "<JWS>"}`. 200 only after the commit; each
    refused body leaves a row in `siwa.rejected_notifications`. A body
    over `SIWA_MAX_BODY_BYTES` is refused 413 before it is read, with
    `Connection: close`.

    Args:
        body (AppleNotificationBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: AppleNotificationBody,
) -> AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable | None:
    """Apple's server-to-server notification

     Apple's body `{"payload": "<JWS>"}`. 200 only after the commit; each
    refused body leaves a row in `siwa.rejected_notifications`. A body
    over `SIWA_MAX_BODY_BYTES` is refused 413 before it is read, with
    `Connection: close`.

    Args:
        body (AppleNotificationBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AcceptedNotification | BodyTooLarge | NotificationRefusal | Unavailable
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
