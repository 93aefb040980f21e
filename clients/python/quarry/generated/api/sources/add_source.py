from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.add_source_request import AddSourceRequest
from ...models.error_body import ErrorBody
from ...models.source_accepted import SourceAccepted
from ...types import UNSET, Response, Unset


def _get_kwargs(
    world_id: UUID,
    *,
    body: AddSourceRequest,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/worlds/{world_id}/sources".format(
            world_id=quote(str(world_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | SourceAccepted | None:
    if response.status_code == 200:
        response_200 = SourceAccepted.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = SourceAccepted.from_dict(response.json())

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

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 502:
        response_502 = ErrorBody.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | SourceAccepted]:
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
    body: AddSourceRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | SourceAccepted]:
    """Add a source from a JSON body. The text is stored, split into chunks and queued for
    embedding; the answer comes at once with the ingest job (202). A file is uploaded with
    `POST /v1/worlds/{world_id}/sources/upload` (a `multipart/form-data` body sent here is taken
    too, as before that operation existed).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        idempotency_key (str | Unset):
        body (AddSourceRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SourceAccepted]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AddSourceRequest,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | SourceAccepted | None:
    """Add a source from a JSON body. The text is stored, split into chunks and queued for
    embedding; the answer comes at once with the ingest job (202). A file is uploaded with
    `POST /v1/worlds/{world_id}/sources/upload` (a `multipart/form-data` body sent here is taken
    too, as before that operation existed).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        idempotency_key (str | Unset):
        body (AddSourceRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SourceAccepted
    """

    return sync_detailed(
        world_id=world_id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AddSourceRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | SourceAccepted]:
    """Add a source from a JSON body. The text is stored, split into chunks and queued for
    embedding; the answer comes at once with the ingest job (202). A file is uploaded with
    `POST /v1/worlds/{world_id}/sources/upload` (a `multipart/form-data` body sent here is taken
    too, as before that operation existed).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        idempotency_key (str | Unset):
        body (AddSourceRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SourceAccepted]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AddSourceRequest,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | SourceAccepted | None:
    """Add a source from a JSON body. The text is stored, split into chunks and queued for
    embedding; the answer comes at once with the ingest job (202). A file is uploaded with
    `POST /v1/worlds/{world_id}/sources/upload` (a `multipart/form-data` body sent here is taken
    too, as before that operation existed).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        idempotency_key (str | Unset):
        body (AddSourceRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SourceAccepted
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
