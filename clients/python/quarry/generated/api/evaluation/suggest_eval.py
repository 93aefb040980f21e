from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.suggest_request import SuggestRequest
from ...models.suggested_eval_set import SuggestedEvalSet
from ...types import Response


def _get_kwargs(
    world_id: UUID,
    *,
    body: SuggestRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/worlds/{world_id}/evals/suggest".format(
            world_id=quote(str(world_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | SuggestedEvalSet | None:
    if response.status_code == 200:
        response_200 = SuggestedEvalSet.from_dict(response.json())

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
) -> Response[ErrorBody | SuggestedEvalSet]:
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
    body: SuggestRequest,
) -> Response[ErrorBody | SuggestedEvalSet]:
    """Draft a test set from the world's own sections: each heading that is a question becomes a
    query, the start of the text under it the expected answer. A starter for FAQ-shaped
    documents, to be reviewed before use; nothing is stored.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (SuggestRequest): What to draft.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SuggestedEvalSet]
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
    body: SuggestRequest,
) -> ErrorBody | SuggestedEvalSet | None:
    """Draft a test set from the world's own sections: each heading that is a question becomes a
    query, the start of the text under it the expected answer. A starter for FAQ-shaped
    documents, to be reviewed before use; nothing is stored.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (SuggestRequest): What to draft.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SuggestedEvalSet
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
    body: SuggestRequest,
) -> Response[ErrorBody | SuggestedEvalSet]:
    """Draft a test set from the world's own sections: each heading that is a question becomes a
    query, the start of the text under it the expected answer. A starter for FAQ-shaped
    documents, to be reviewed before use; nothing is stored.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (SuggestRequest): What to draft.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SuggestedEvalSet]
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
    body: SuggestRequest,
) -> ErrorBody | SuggestedEvalSet | None:
    """Draft a test set from the world's own sections: each heading that is a question becomes a
    query, the start of the text under it the expected answer. A starter for FAQ-shaped
    documents, to be reviewed before use; nothing is stored.

     Scope: `read`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        body (SuggestRequest): What to draft.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SuggestedEvalSet
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            client=client,
            body=body,
        )
    ).parsed
