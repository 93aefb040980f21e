from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job import Job
from ...models.reingest_request import ReingestRequest
from ...types import Response


def _get_kwargs(
    world_id: UUID,
    *,
    body: ReingestRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/worlds/{world_id}/reingest".format(
            world_id=quote(str(world_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | Job | None:
    if response.status_code == 202:
        response_202 = Job.from_dict(response.json())

        return response_202

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

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | Job]:
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
    body: ReingestRequest,
) -> Response[ErrorBody | Job]:
    """Rebuild the world from its stored sources under a new embedding and/or chunking profile —
    the only way to change a locked profile. A new run is chunked and embedded beside the
    active one while retrieval keeps serving the active one; when every chunk is embedded the
    world switches to the new run and profile in one step and the old run's points and rows are
    deleted. A run with failed chunks is abandoned (the job fails, the world is unchanged);
    cancelling the job abandons it too. One re-ingest at a time per world. The answer comes at
    once with the job `queued`: the sources are chunked in the background, then it runs.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (ReingestRequest): A re-ingest: the new embedding and/or chunking profile. What is
            absent stays as it is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Job]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    body: ReingestRequest,
) -> ErrorBody | Job | None:
    """Rebuild the world from its stored sources under a new embedding and/or chunking profile —
    the only way to change a locked profile. A new run is chunked and embedded beside the
    active one while retrieval keeps serving the active one; when every chunk is embedded the
    world switches to the new run and profile in one step and the old run's points and rows are
    deleted. A run with failed chunks is abandoned (the job fails, the world is unchanged);
    cancelling the job abandons it too. One re-ingest at a time per world. The answer comes at
    once with the job `queued`: the sources are chunked in the background, then it runs.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (ReingestRequest): A re-ingest: the new embedding and/or chunking profile. What is
            absent stays as it is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Job
    """

    return sync_detailed(
        world_id=world_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    body: ReingestRequest,
) -> Response[ErrorBody | Job]:
    """Rebuild the world from its stored sources under a new embedding and/or chunking profile —
    the only way to change a locked profile. A new run is chunked and embedded beside the
    active one while retrieval keeps serving the active one; when every chunk is embedded the
    world switches to the new run and profile in one step and the old run's points and rows are
    deleted. A run with failed chunks is abandoned (the job fails, the world is unchanged);
    cancelling the job abandons it too. One re-ingest at a time per world. The answer comes at
    once with the job `queued`: the sources are chunked in the background, then it runs.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (ReingestRequest): A re-ingest: the new embedding and/or chunking profile. What is
            absent stays as it is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Job]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    body: ReingestRequest,
) -> ErrorBody | Job | None:
    """Rebuild the world from its stored sources under a new embedding and/or chunking profile —
    the only way to change a locked profile. A new run is chunked and embedded beside the
    active one while retrieval keeps serving the active one; when every chunk is embedded the
    world switches to the new run and profile in one step and the old run's points and rows are
    deleted. A run with failed chunks is abandoned (the job fails, the world is unchanged);
    cancelling the job abandons it too. One re-ingest at a time per world. The answer comes at
    once with the job `queued`: the sources are chunked in the background, then it runs.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (ReingestRequest): A re-ingest: the new embedding and/or chunking profile. What is
            absent stays as it is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Job
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            client=client,
            body=body,
        )
    ).parsed
