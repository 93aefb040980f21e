from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.world_list import WorldList
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    offset: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    name: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["offset"] = offset

    params["limit"] = limit

    params["name"] = name

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/worlds",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | WorldList | None:
    if response.status_code == 200:
        response_200 = WorldList.from_dict(response.json())

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

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | WorldList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    offset: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    name: str | Unset = UNSET,
) -> Response[ErrorBody | WorldList]:
    """List every world with its counts (or those of one name).

     Scope: `read`.

    Args:
        offset (int | Unset):
        limit (int | Unset):
        name (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | WorldList]
    """

    kwargs = _get_kwargs(
        offset=offset,
        limit=limit,
        name=name,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    offset: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    name: str | Unset = UNSET,
) -> ErrorBody | WorldList | None:
    """List every world with its counts (or those of one name).

     Scope: `read`.

    Args:
        offset (int | Unset):
        limit (int | Unset):
        name (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | WorldList
    """

    return sync_detailed(
        client=client,
        offset=offset,
        limit=limit,
        name=name,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    offset: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    name: str | Unset = UNSET,
) -> Response[ErrorBody | WorldList]:
    """List every world with its counts (or those of one name).

     Scope: `read`.

    Args:
        offset (int | Unset):
        limit (int | Unset):
        name (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | WorldList]
    """

    kwargs = _get_kwargs(
        offset=offset,
        limit=limit,
        name=name,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    offset: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    name: str | Unset = UNSET,
) -> ErrorBody | WorldList | None:
    """List every world with its counts (or those of one name).

     Scope: `read`.

    Args:
        offset (int | Unset):
        limit (int | Unset):
        name (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | WorldList
    """

    return (
        await asyncio_detailed(
            client=client,
            offset=offset,
            limit=limit,
            name=name,
        )
    ).parsed
