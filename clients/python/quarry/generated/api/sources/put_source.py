from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.add_source_request import AddSourceRequest
from ...models.add_source_upload import AddSourceUpload
from ...models.error_body import ErrorBody
from ...models.source_accepted import SourceAccepted
from ...types import UNSET, Response, Unset


def _get_kwargs(
    world_id: UUID,
    source_id: UUID,
    *,
    body: AddSourceRequest | AddSourceUpload | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    if_match: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    if not isinstance(if_match, Unset):
        headers["If-Match"] = if_match

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/worlds/{world_id}/sources/{source_id}".format(
            world_id=quote(str(world_id), safe=""),
            source_id=quote(str(source_id), safe=""),
        ),
    }

    if isinstance(body, AddSourceRequest):
        _kwargs["json"] = body.to_dict()

        headers["Content-Type"] = "application/json"
    if isinstance(body, AddSourceUpload):
        _kwargs["files"] = body.to_multipart()

        headers["Content-Type"] = "multipart/form-data; boundary=+++"

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

    if response.status_code == 412:
        response_412 = ErrorBody.from_dict(response.json())

        return response_412

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

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
    source_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AddSourceRequest | AddSourceUpload | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    if_match: str | Unset = UNSET,
) -> Response[ErrorBody | SourceAccepted]:
    """Replace a source's text with a new version (a JSON body as for `POST …/sources`, or a
    `multipart/form-data` upload as for `POST …/sources/upload`). Identical text and details:
    `200`, `outcome: unchanged`, nothing embedded. Otherwise `202`, `outcome: replaced`: the new
    version is chunked, chunks whose text the world's model has already embedded take that
    vector (no provider call), and the rest are embedded by a `replace` job; the current version
    keeps answering retrievals until every chunk of the new one is embedded, then the source
    switches at once. A replace of a source whose previous replace is still embedding supersedes
    it (that one is cancelled and never served); a failed or cancelled replace leaves the
    current version serving. `If-Match: "<version>"` makes the write conditional (`412` when
    the source is at another version).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        idempotency_key (str | Unset):
        if_match (str | Unset):
        body (AddSourceRequest):
        body (AddSourceUpload): The `multipart/form-data` form of a source upload. A part left out
            is not given; an empty
            one is (there is no `null` in a form). Any other part is refused.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SourceAccepted]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        source_id=source_id,
        body=body,
        idempotency_key=idempotency_key,
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
    body: AddSourceRequest | AddSourceUpload | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    if_match: str | Unset = UNSET,
) -> ErrorBody | SourceAccepted | None:
    """Replace a source's text with a new version (a JSON body as for `POST …/sources`, or a
    `multipart/form-data` upload as for `POST …/sources/upload`). Identical text and details:
    `200`, `outcome: unchanged`, nothing embedded. Otherwise `202`, `outcome: replaced`: the new
    version is chunked, chunks whose text the world's model has already embedded take that
    vector (no provider call), and the rest are embedded by a `replace` job; the current version
    keeps answering retrievals until every chunk of the new one is embedded, then the source
    switches at once. A replace of a source whose previous replace is still embedding supersedes
    it (that one is cancelled and never served); a failed or cancelled replace leaves the
    current version serving. `If-Match: "<version>"` makes the write conditional (`412` when
    the source is at another version).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        idempotency_key (str | Unset):
        if_match (str | Unset):
        body (AddSourceRequest):
        body (AddSourceUpload): The `multipart/form-data` form of a source upload. A part left out
            is not given; an empty
            one is (there is no `null` in a form). Any other part is refused.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SourceAccepted
    """

    return sync_detailed(
        world_id=world_id,
        source_id=source_id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
        if_match=if_match,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    source_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AddSourceRequest | AddSourceUpload | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    if_match: str | Unset = UNSET,
) -> Response[ErrorBody | SourceAccepted]:
    """Replace a source's text with a new version (a JSON body as for `POST …/sources`, or a
    `multipart/form-data` upload as for `POST …/sources/upload`). Identical text and details:
    `200`, `outcome: unchanged`, nothing embedded. Otherwise `202`, `outcome: replaced`: the new
    version is chunked, chunks whose text the world's model has already embedded take that
    vector (no provider call), and the rest are embedded by a `replace` job; the current version
    keeps answering retrievals until every chunk of the new one is embedded, then the source
    switches at once. A replace of a source whose previous replace is still embedding supersedes
    it (that one is cancelled and never served); a failed or cancelled replace leaves the
    current version serving. `If-Match: "<version>"` makes the write conditional (`412` when
    the source is at another version).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        idempotency_key (str | Unset):
        if_match (str | Unset):
        body (AddSourceRequest):
        body (AddSourceUpload): The `multipart/form-data` form of a source upload. A part left out
            is not given; an empty
            one is (there is no `null` in a form). Any other part is refused.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SourceAccepted]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        source_id=source_id,
        body=body,
        idempotency_key=idempotency_key,
        if_match=if_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    source_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AddSourceRequest | AddSourceUpload | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    if_match: str | Unset = UNSET,
) -> ErrorBody | SourceAccepted | None:
    """Replace a source's text with a new version (a JSON body as for `POST …/sources`, or a
    `multipart/form-data` upload as for `POST …/sources/upload`). Identical text and details:
    `200`, `outcome: unchanged`, nothing embedded. Otherwise `202`, `outcome: replaced`: the new
    version is chunked, chunks whose text the world's model has already embedded take that
    vector (no provider call), and the rest are embedded by a `replace` job; the current version
    keeps answering retrievals until every chunk of the new one is embedded, then the source
    switches at once. A replace of a source whose previous replace is still embedding supersedes
    it (that one is cancelled and never served); a failed or cancelled replace leaves the
    current version serving. `If-Match: "<version>"` makes the write conditional (`412` when
    the source is at another version).

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        source_id (UUID):
        idempotency_key (str | Unset):
        if_match (str | Unset):
        body (AddSourceRequest):
        body (AddSourceUpload): The `multipart/form-data` form of a source upload. A part left out
            is not given; an empty
            one is (there is no `null` in a form). Any other part is refused.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SourceAccepted
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            source_id=source_id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
            if_match=if_match,
        )
    ).parsed
