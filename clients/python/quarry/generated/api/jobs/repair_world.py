from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job import Job
from ...types import Response


def _get_kwargs(
    world_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/worlds/{world_id}/repair".format(
            world_id=quote(str(world_id), safe=""),
        ),
    }

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
) -> Response[ErrorBody | Job]:
    """Start a `repair` job: a lost collection is created again, points without a chunk are
    deleted, stale points are deleted and their chunks embedded again, embedded chunks without a
    point get it back from the vector the store kept (no provider call; chunks embedded before
    vectors were kept are embedded again), and pending chunks whose point is already right are
    marked embedded without a provider call. The reconciliation runs in the background; follow
    it with `GET /v1/jobs/{job_id}` or its events (its `progress` event counts what it found,
    `points_restored` among them).

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Job]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | Job | None:
    """Start a `repair` job: a lost collection is created again, points without a chunk are
    deleted, stale points are deleted and their chunks embedded again, embedded chunks without a
    point get it back from the vector the store kept (no provider call; chunks embedded before
    vectors were kept are embedded again), and pending chunks whose point is already right are
    marked embedded without a provider call. The reconciliation runs in the background; follow
    it with `GET /v1/jobs/{job_id}` or its events (its `progress` event counts what it found,
    `points_restored` among them).

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Job
    """

    return sync_detailed(
        world_id=world_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | Job]:
    """Start a `repair` job: a lost collection is created again, points without a chunk are
    deleted, stale points are deleted and their chunks embedded again, embedded chunks without a
    point get it back from the vector the store kept (no provider call; chunks embedded before
    vectors were kept are embedded again), and pending chunks whose point is already right are
    marked embedded without a provider call. The reconciliation runs in the background; follow
    it with `GET /v1/jobs/{job_id}` or its events (its `progress` event counts what it found,
    `points_restored` among them).

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Job]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | Job | None:
    """Start a `repair` job: a lost collection is created again, points without a chunk are
    deleted, stale points are deleted and their chunks embedded again, embedded chunks without a
    point get it back from the vector the store kept (no provider call; chunks embedded before
    vectors were kept are embedded again), and pending chunks whose point is already right are
    marked embedded without a provider call. The reconciliation runs in the background; follow
    it with `GET /v1/jobs/{job_id}` or its events (its `progress` event counts what it found,
    `points_restored` among them).

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):

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
        )
    ).parsed
