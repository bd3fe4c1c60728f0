from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.redrive_destination import RedriveDestination
from ...models.redrive_ids import RedriveIds
from ...models.redrive_result import RedriveResult
from typing import cast



def _get_kwargs(
    *,
    body: RedriveDestination | RedriveIds,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/dead-letters/redrive",
    }

    
    if isinstance(body, RedriveIds):
        _kwargs["json"] = body.to_dict()
    else:
        _kwargs["json"] = body.to_dict()


    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | RedriveResult | None:
    if response.status_code == 200:
        response_200 = RedriveResult.from_dict(response.json())



        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())



        return response_403

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())



        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())



        return response_422

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | RedriveResult]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: RedriveDestination | RedriveIds,

) -> Response[Problem | RedriveResult]:
    """ `POST /v1/dead-letters/redrive`.

    Args:
        body (RedriveDestination | RedriveIds): What to redrive: exactly one of `ids` and
            `destination`. Described
            here; the body is read as [`Given`], so that a wrong one is a 422
            naming the rule.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RedriveResult]
     """


    kwargs = _get_kwargs(
        body=body,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    body: RedriveDestination | RedriveIds,

) -> Problem | RedriveResult | None:
    """ `POST /v1/dead-letters/redrive`.

    Args:
        body (RedriveDestination | RedriveIds): What to redrive: exactly one of `ids` and
            `destination`. Described
            here; the body is read as [`Given`], so that a wrong one is a 422
            naming the rule.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RedriveResult
     """


    return sync_detailed(
        client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: RedriveDestination | RedriveIds,

) -> Response[Problem | RedriveResult]:
    """ `POST /v1/dead-letters/redrive`.

    Args:
        body (RedriveDestination | RedriveIds): What to redrive: exactly one of `ids` and
            `destination`. Described
            here; the body is read as [`Given`], so that a wrong one is a 422
            naming the rule.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RedriveResult]
     """


    kwargs = _get_kwargs(
        body=body,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    body: RedriveDestination | RedriveIds,

) -> Problem | RedriveResult | None:
    """ `POST /v1/dead-letters/redrive`.

    Args:
        body (RedriveDestination | RedriveIds): What to redrive: exactly one of `ids` and
            `destination`. Described
            here; the body is read as [`Given`], so that a wrong one is a 422
            naming the rule.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RedriveResult
     """


    return (await asyncio_detailed(
        client=client,
body=body,

    )).parsed
