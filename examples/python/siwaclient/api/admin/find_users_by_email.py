from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bad_parameter import BadParameter
from ...models.find_users_by_email_data_body import FindUsersByEmailDataBody
from ...models.find_users_by_email_json_body import FindUsersByEmailJsonBody
from ...models.find_users_by_email_response_200 import FindUsersByEmailResponse200
from ...models.job_change_forbidden_error import JobChangeForbiddenError
from ...models.too_many_failures_error import TooManyFailuresError
from ...models.unauthorized_error import UnauthorizedError
from ...models.unavailable import Unavailable
from ...types import UNSET, Response


def _get_kwargs(
    *,
    body: FindUsersByEmailJsonBody | FindUsersByEmailDataBody | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/admin/users/find",
    }

    if isinstance(body, FindUsersByEmailJsonBody):
        _kwargs["json"] = body.to_dict()

        headers["Content-Type"] = "application/json"
    if isinstance(body, FindUsersByEmailDataBody):
        _kwargs["data"] = body.to_dict()
        headers["Content-Type"] = "application/x-www-form-urlencoded"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    BadParameter
    | FindUsersByEmailResponse200
    | JobChangeForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    if response.status_code == 200:
        response_200 = FindUsersByEmailResponse200.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = BadParameter.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = UnauthorizedError.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = JobChangeForbiddenError.from_dict(response.json())

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
    | FindUsersByEmailResponse200
    | JobChangeForbiddenError
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
    body: FindUsersByEmailJsonBody | FindUsersByEmailDataBody | Unset = UNSET,
) -> Response[
    BadParameter
    | FindUsersByEmailResponse200
    | JobChangeForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """the active users with exactly this email address, audited as `user.looked_up` (the address is kept
    nowhere)

     A POST, so that the address is in no URL or access log. As JSON with a
    bearer key; from the page, a form with its CSRF token (`email`,
    `csrf`, `days`), answered with the page again.

    Args:
        body (FindUsersByEmailJsonBody):
        body (FindUsersByEmailDataBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | FindUsersByEmailResponse200 | JobChangeForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable]
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
    body: FindUsersByEmailJsonBody | FindUsersByEmailDataBody | Unset = UNSET,
) -> (
    BadParameter
    | FindUsersByEmailResponse200
    | JobChangeForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the active users with exactly this email address, audited as `user.looked_up` (the address is kept
    nowhere)

     A POST, so that the address is in no URL or access log. As JSON with a
    bearer key; from the page, a form with its CSRF token (`email`,
    `csrf`, `days`), answered with the page again.

    Args:
        body (FindUsersByEmailJsonBody):
        body (FindUsersByEmailDataBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | FindUsersByEmailResponse200 | JobChangeForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: FindUsersByEmailJsonBody | FindUsersByEmailDataBody | Unset = UNSET,
) -> Response[
    BadParameter
    | FindUsersByEmailResponse200
    | JobChangeForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
]:
    """the active users with exactly this email address, audited as `user.looked_up` (the address is kept
    nowhere)

     A POST, so that the address is in no URL or access log. As JSON with a
    bearer key; from the page, a form with its CSRF token (`email`,
    `csrf`, `days`), answered with the page again.

    Args:
        body (FindUsersByEmailJsonBody):
        body (FindUsersByEmailDataBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BadParameter | FindUsersByEmailResponse200 | JobChangeForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: FindUsersByEmailJsonBody | FindUsersByEmailDataBody | Unset = UNSET,
) -> (
    BadParameter
    | FindUsersByEmailResponse200
    | JobChangeForbiddenError
    | TooManyFailuresError
    | UnauthorizedError
    | Unavailable
    | None
):
    """the active users with exactly this email address, audited as `user.looked_up` (the address is kept
    nowhere)

     A POST, so that the address is in no URL or access log. As JSON with a
    bearer key; from the page, a form with its CSRF token (`email`,
    `csrf`, `days`), answered with the page again.

    Args:
        body (FindUsersByEmailJsonBody):
        body (FindUsersByEmailDataBody):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BadParameter | FindUsersByEmailResponse200 | JobChangeForbiddenError | TooManyFailuresError | UnauthorizedError | Unavailable
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
