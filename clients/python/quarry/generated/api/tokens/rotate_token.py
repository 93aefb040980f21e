from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.created_token import CreatedToken
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    token_id: UUID,
    *,
    grace_s: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["grace_s"] = grace_s

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/tokens/{token_id}/rotate".format(
            token_id=quote(str(token_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> CreatedToken | ErrorBody | None:
    if response.status_code == 200:
        response_200 = CreatedToken.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[CreatedToken | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    token_id: UUID,
    *,
    client: AuthenticatedClient,
    grace_s: int | Unset = UNSET,
) -> Response[CreatedToken | ErrorBody]:
    """A new secret for a token (shown this once); the current one stays accepted for `grace_s`.

     Scope: `admin`. A token limited to some worlds is refused.

    Args:
        token_id (UUID):
        grace_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CreatedToken | ErrorBody]
    """

    kwargs = _get_kwargs(
        token_id=token_id,
        grace_s=grace_s,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    token_id: UUID,
    *,
    client: AuthenticatedClient,
    grace_s: int | Unset = UNSET,
) -> CreatedToken | ErrorBody | None:
    """A new secret for a token (shown this once); the current one stays accepted for `grace_s`.

     Scope: `admin`. A token limited to some worlds is refused.

    Args:
        token_id (UUID):
        grace_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CreatedToken | ErrorBody
    """

    return sync_detailed(
        token_id=token_id,
        client=client,
        grace_s=grace_s,
    ).parsed


async def asyncio_detailed(
    token_id: UUID,
    *,
    client: AuthenticatedClient,
    grace_s: int | Unset = UNSET,
) -> Response[CreatedToken | ErrorBody]:
    """A new secret for a token (shown this once); the current one stays accepted for `grace_s`.

     Scope: `admin`. A token limited to some worlds is refused.

    Args:
        token_id (UUID):
        grace_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CreatedToken | ErrorBody]
    """

    kwargs = _get_kwargs(
        token_id=token_id,
        grace_s=grace_s,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    token_id: UUID,
    *,
    client: AuthenticatedClient,
    grace_s: int | Unset = UNSET,
) -> CreatedToken | ErrorBody | None:
    """A new secret for a token (shown this once); the current one stays accepted for `grace_s`.

     Scope: `admin`. A token limited to some worlds is refused.

    Args:
        token_id (UUID):
        grace_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CreatedToken | ErrorBody
    """

    return (
        await asyncio_detailed(
            token_id=token_id,
            client=client,
            grace_s=grace_s,
        )
    ).parsed
