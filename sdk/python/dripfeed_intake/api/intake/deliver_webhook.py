from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.accepted import Accepted
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    *,
    body: Any,
    x_destination: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    x_tenant: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_destination, Unset):
        headers["X-Destination"] = x_destination

    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    if not isinstance(x_tenant, Unset):
        headers["X-Tenant"] = x_tenant



    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/webhooks/deliver",
    }

    _kwargs["json"] = body

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Accepted | Problem | None:
    if response.status_code == 202:
        response_202 = Accepted.from_dict(response.json())



        return response_202

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())



        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

    if response.status_code == 408:
        response_408 = Problem.from_dict(response.json())



        return response_408

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())



        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())



        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())



        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())



        return response_429

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Accepted | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: Any,
    x_destination: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    x_tenant: str | Unset = UNSET,

) -> Response[Accepted | Problem]:
    """ `POST /v1/webhooks/deliver`: take a webhook in (see the module docs).

    Args:
        x_destination (str | Unset):
        idempotency_key (str | Unset):
        x_tenant (str | Unset):
        body (Any):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Accepted | Problem]
     """


    kwargs = _get_kwargs(
        body=body,
x_destination=x_destination,
idempotency_key=idempotency_key,
x_tenant=x_tenant,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    *,
    client: AuthenticatedClient,
    body: Any,
    x_destination: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    x_tenant: str | Unset = UNSET,

) -> Accepted | Problem | None:
    """ `POST /v1/webhooks/deliver`: take a webhook in (see the module docs).

    Args:
        x_destination (str | Unset):
        idempotency_key (str | Unset):
        x_tenant (str | Unset):
        body (Any):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Accepted | Problem
     """


    return sync_detailed(
        client=client,
body=body,
x_destination=x_destination,
idempotency_key=idempotency_key,
x_tenant=x_tenant,

    ).parsed

async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: Any,
    x_destination: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    x_tenant: str | Unset = UNSET,

) -> Response[Accepted | Problem]:
    """ `POST /v1/webhooks/deliver`: take a webhook in (see the module docs).

    Args:
        x_destination (str | Unset):
        idempotency_key (str | Unset):
        x_tenant (str | Unset):
        body (Any):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Accepted | Problem]
     """


    kwargs = _get_kwargs(
        body=body,
x_destination=x_destination,
idempotency_key=idempotency_key,
x_tenant=x_tenant,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    *,
    client: AuthenticatedClient,
    body: Any,
    x_destination: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
    x_tenant: str | Unset = UNSET,

) -> Accepted | Problem | None:
    """ `POST /v1/webhooks/deliver`: take a webhook in (see the module docs).

    Args:
        x_destination (str | Unset):
        idempotency_key (str | Unset):
        x_tenant (str | Unset):
        body (Any):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Accepted | Problem
     """


    return (await asyncio_detailed(
        client=client,
body=body,
x_destination=x_destination,
idempotency_key=idempotency_key,
x_tenant=x_tenant,

    )).parsed
