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
    job_id: UUID,
    *,
    last_event_id: int | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = str(last_event_id)

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/jobs/{job_id}/events".format(
            job_id=quote(str(job_id), safe=""),
        ),
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | ErrorBody | None:
    if response.status_code == 200:
        response_200 = cast(Any, None)
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
) -> Response[Any | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    last_event_id: int | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Server-sent events of a job: `progress`, `warning`, `error` and `status`, each with its id.
    Replays from `Last-Event-ID` (everything when absent) and ends after a terminal status that
    nothing follows (a retried job's stream goes on past its `failed`).

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        job_id (UUID):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    last_event_id: int | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Server-sent events of a job: `progress`, `warning`, `error` and `status`, each with its id.
    Replays from `Last-Event-ID` (everything when absent) and ends after a terminal status that
    nothing follows (a retried job's stream goes on past its `failed`).

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        job_id (UUID):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return sync_detailed(
        job_id=job_id,
        client=client,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    last_event_id: int | Unset = UNSET,
) -> Response[Any | ErrorBody]:
    """Server-sent events of a job: `progress`, `warning`, `error` and `status`, each with its id.
    Replays from `Last-Event-ID` (everything when absent) and ends after a terminal status that
    nothing follows (a retried job's stream goes on past its `failed`).

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        job_id (UUID):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    last_event_id: int | Unset = UNSET,
) -> Any | ErrorBody | None:
    """Server-sent events of a job: `progress`, `warning`, `error` and `status`, each with its id.
    Replays from `Last-Event-ID` (everything when absent) and ends after a terminal status that
    nothing follows (a retried job's stream goes on past its `failed`).

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        job_id (UUID):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return (
        await asyncio_detailed(
            job_id=job_id,
            client=client,
            last_event_id=last_event_id,
        )
    ).parsed
