from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    world_id: UUID,
    source_id: UUID,
    *,
    if_match: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["If-Match"] = if_match

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/worlds/{world_id}/sources/{source_id}".format(
            world_id=quote(str(world_id), safe=""),
            source_id=quote(str(source_id), safe=""),
        ),
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | ErrorBody | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

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

    if response.status_code == 412:
        response_412 = ErrorBody.from_dict(response.json())

        return response_412

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Any | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    world_id: UUID,
    source_id: UUID,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Delete a source: its points (in every collection the world uses), chunks and manifest
    entries. The world's other sources keep their book numbers; numbers are never reused.
    Unfinished jobs drop the deleted work; one left with nothing to do ends (`cancelled` when
    all its work was this source's).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        source_id=source_id,
        if_match=if_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    world_id: UUID,
    source_id: UUID,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Delete a source: its points (in every collection the world uses), chunks and manifest
    entries. The world's other sources keep their book numbers; numbers are never reused.
    Unfinished jobs drop the deleted work; one left with nothing to do ends (`cancelled` when
    all its work was this source's).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return sync_detailed(
        world_id=world_id,
        source_id=source_id,
        client=client,
        if_match=if_match,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    source_id: UUID,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Delete a source: its points (in every collection the world uses), chunks and manifest
    entries. The world's other sources keep their book numbers; numbers are never reused.
    Unfinished jobs drop the deleted work; one left with nothing to do ends (`cancelled` when
    all its work was this source's).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        source_id=source_id,
        if_match=if_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    source_id: UUID,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Delete a source: its points (in every collection the world uses), chunks and manifest
    entries. The world's other sources keep their book numbers; numbers are never reused.
    Unfinished jobs drop the deleted work; one left with nothing to do ends (`cancelled` when
    all its work was this source's).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            source_id=source_id,
            client=client,
            if_match=if_match,
        )
    ).parsed
