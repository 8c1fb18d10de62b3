from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.apple_rejected_client import AppleRejectedClient
from ...models.forbidden_error import ForbiddenError
from ...models.sign_in_conflict import SignInConflict
from ...models.sign_in_refusal import SignInRefusal
from ...models.sign_in_request import SignInRequest
from ...models.signed_in_user import SignedInUser
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...types import Response


def _get_kwargs(
    *,
    body: SignInRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/sign-in",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    AppleRejectedClient
    | ForbiddenError
    | SignInConflict
    | SignInRefusal
    | SignedInUser
    | UnauthorizedError
    | Unavailable
    | None
):
    if response.status_code == 200:
        response_200 = SignedInUser.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = SignInRefusal.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = UnauthorizedError.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ForbiddenError.from_dict(response.json())

        return response_403

    if response.status_code == 409:
        response_409 = SignInConflict.from_dict(response.json())

        return response_409

    if response.status_code == 502:
        response_502 = AppleRejectedClient.from_dict(response.json())

        return response_502

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
    AppleRejectedClient
    | ForbiddenError
    | SignInConflict
    | SignInRefusal
    | SignedInUser
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
    body: SignInRequest,
) -> Response[
    AppleRejectedClient
    | ForbiddenError
    | SignInConflict
    | SignInRefusal
    | SignedInUser
    | UnauthorizedError
    | Unavailable
]:
    """verify Apple's identity token and/or exchange the authorization code; upsert the user

     A native app's body has `identity_token` (and `authorization_code`);
    a web client that asked for the code alone sends
    `authorization_code`, `client_id` and `redirect_uri`. A retried
    request (the same code for the same user within ten minutes) gets
    the first answer again.

    Args:
        body (SignInRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppleRejectedClient | ForbiddenError | SignInConflict | SignInRefusal | SignedInUser | UnauthorizedError | Unavailable]
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
    client: AuthenticatedClient,
    body: SignInRequest,
) -> (
    AppleRejectedClient
    | ForbiddenError
    | SignInConflict
    | SignInRefusal
    | SignedInUser
    | UnauthorizedError
    | Unavailable
    | None
):
    """verify Apple's identity token and/or exchange the authorization code; upsert the user

     A native app's body has `identity_token` (and `authorization_code`);
    a web client that asked for the code alone sends
    `authorization_code`, `client_id` and `redirect_uri`. A retried
    request (the same code for the same user within ten minutes) gets
    the first answer again.

    Args:
        body (SignInRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppleRejectedClient | ForbiddenError | SignInConflict | SignInRefusal | SignedInUser | UnauthorizedError | Unavailable
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: SignInRequest,
) -> Response[
    AppleRejectedClient
    | ForbiddenError
    | SignInConflict
    | SignInRefusal
    | SignedInUser
    | UnauthorizedError
    | Unavailable
]:
    """verify Apple's identity token and/or exchange the authorization code; upsert the user

     A native app's body has `identity_token` (and `authorization_code`);
    a web client that asked for the code alone sends
    `authorization_code`, `client_id` and `redirect_uri`. A retried
    request (the same code for the same user within ten minutes) gets
    the first answer again.

    Args:
        body (SignInRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppleRejectedClient | ForbiddenError | SignInConflict | SignInRefusal | SignedInUser | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: SignInRequest,
) -> (
    AppleRejectedClient
    | ForbiddenError
    | SignInConflict
    | SignInRefusal
    | SignedInUser
    | UnauthorizedError
    | Unavailable
    | None
):
    """verify Apple's identity token and/or exchange the authorization code; upsert the user

     A native app's body has `identity_token` (and `authorization_code`);
    a web client that asked for the code alone sends
    `authorization_code`, `client_id` and `redirect_uri`. A retried
    request (the same code for the same user within ten minutes) gets
    the first answer again.

    Args:
        body (SignInRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppleRejectedClient | ForbiddenError | SignInConflict | SignInRefusal | SignedInUser | UnauthorizedError | Unavailable
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
