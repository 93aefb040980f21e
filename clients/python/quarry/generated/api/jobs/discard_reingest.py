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
    job_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/worlds/{world_id}/reingest/{job_id}/discard".format(
            world_id=quote(str(world_id), safe=""),
            job_id=quote(str(job_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | Job | None:
    if response.status_code == 200:
        response_200 = Job.from_dict(response.json())

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
    job_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | Job]:
    """Abandon a gated re-ingest: the job is cancelled and its run removed; the world keeps
    serving its run. The gate becomes `discarded`.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        job_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Job]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        job_id=job_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    world_id: UUID,
    job_id: UUID,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | Job | None:
    """Abandon a gated re-ingest: the job is cancelled and its run removed; the world keeps
    serving its run. The gate becomes `discarded`.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        job_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Job
    """

    return sync_detailed(
        world_id=world_id,
        job_id=job_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    job_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | Job]:
    """Abandon a gated re-ingest: the job is cancelled and its run removed; the world keeps
    serving its run. The gate becomes `discarded`.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        job_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | Job]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        job_id=job_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    job_id: UUID,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | Job | None:
    """Abandon a gated re-ingest: the job is cancelled and its run removed; the world keeps
    serving its run. The gate becomes `discarded`.

     Scope: `admin`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        job_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | Job
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            job_id=job_id,
            client=client,
        )
    ).parsed
