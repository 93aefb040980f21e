from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.source import Source
from ...types import UNSET, Response


def _get_kwargs(
    world_id: UUID,
    *,
    key: str,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["key"] = key

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/worlds/{world_id}/sources/by-key".format(
            world_id=quote(str(world_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | Source | None:
    if response.status_code == 200:
        response_200 = Source.from_dict(response.json())

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
) -> Response[ErrorBody | Source]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    key: str,
) -> Response[ErrorBody | Source]:
    """The source with key `key`.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        key (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Source]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        key=key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    key: str,
) -> ErrorBody | Source | None:
    """The source with key `key`.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        key (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Source
    """

    return sync_detailed(
        world_id=world_id,
        client=client,
        key=key,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    key: str,
) -> Response[ErrorBody | Source]:
    """The source with key `key`.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        key (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Source]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        key=key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    key: str,
) -> ErrorBody | Source | None:
    """The source with key `key`.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        key (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Source
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            client=client,
            key=key,
        )
    ).parsed
