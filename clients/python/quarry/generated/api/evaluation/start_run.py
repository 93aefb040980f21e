from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.eval_run import EvalRun
from ...models.eval_run_request import EvalRunRequest
from ...types import Response


def _get_kwargs(
    world_id: UUID,
    eval_id: UUID,
    *,
    body: EvalRunRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/worlds/{world_id}/evals/{eval_id}/runs".format(
            world_id=quote(str(world_id), safe=""),
            eval_id=quote(str(eval_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | EvalRun | None:
    if response.status_code == 202:
        response_202 = EvalRun.from_dict(response.json())

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
) -> Response[ErrorBody | EvalRun]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    world_id: UUID,
    eval_id: UUID,
    *,
    client: AuthenticatedClient,
    body: EvalRunRequest,
) -> Response[ErrorBody | EvalRun]:
    """Start a run: every item of the test set is retrieved under every setting at every budget,
    in the background (one retrieval at a time, its keys taken in turn with the world's
    ingestion). Watch it with `…/events` or
    read it; its report fills as items are scored.

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        eval_id (UUID):
        body (EvalRunRequest): What a run measures: retrieval settings and context budgets. Every
            setting runs at every
            budget, for every item of the test set.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | EvalRun]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        eval_id=eval_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    world_id: UUID,
    eval_id: UUID,
    *,
    client: AuthenticatedClient,
    body: EvalRunRequest,
) -> ErrorBody | EvalRun | None:
    """Start a run: every item of the test set is retrieved under every setting at every budget,
    in the background (one retrieval at a time, its keys taken in turn with the world's
    ingestion). Watch it with `…/events` or
    read it; its report fills as items are scored.

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        eval_id (UUID):
        body (EvalRunRequest): What a run measures: retrieval settings and context budgets. Every
            setting runs at every
            budget, for every item of the test set.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | EvalRun
    """

    return sync_detailed(
        world_id=world_id,
        eval_id=eval_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    world_id: UUID,
    eval_id: UUID,
    *,
    client: AuthenticatedClient,
    body: EvalRunRequest,
) -> Response[ErrorBody | EvalRun]:
    """Start a run: every item of the test set is retrieved under every setting at every budget,
    in the background (one retrieval at a time, its keys taken in turn with the world's
    ingestion). Watch it with `…/events` or
    read it; its report fills as items are scored.

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        eval_id (UUID):
        body (EvalRunRequest): What a run measures: retrieval settings and context budgets. Every
            setting runs at every
            budget, for every item of the test set.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | EvalRun]
    """

    kwargs = _get_kwargs(
        world_id=world_id,
        eval_id=eval_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    world_id: UUID,
    eval_id: UUID,
    *,
    client: AuthenticatedClient,
    body: EvalRunRequest,
) -> ErrorBody | EvalRun | None:
    """Start a run: every item of the test set is retrieved under every setting at every budget,
    in the background (one retrieval at a time, its keys taken in turn with the world's
    ingestion). Watch it with `…/events` or
    read it; its report fills as items are scored.

     Scope: `ingest`. A token limited to other worlds is answered 404, as a missing world.

    Args:
        world_id (UUID):
        eval_id (UUID):
        body (EvalRunRequest): What a run measures: retrieval settings and context budgets. Every
            setting runs at every
            budget, for every item of the test set.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | EvalRun
    """

    return (
        await asyncio_detailed(
            world_id=world_id,
            eval_id=eval_id,
            client=client,
            body=body,
        )
    ).parsed
