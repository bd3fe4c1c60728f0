from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.destination_put import DestinationPut
from ...models.destination_view import DestinationView
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    name: str,
    *,
    body: DestinationPut,
    if_match: str | Unset = UNSET,
    if_none_match: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["If-Match"] = if_match

    if not isinstance(if_none_match, Unset):
        headers["If-None-Match"] = if_none_match



    

    

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/destinations/{name}".format(name=quote(str(name), safe=""),),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> DestinationView | Problem | None:
    if response.status_code == 200:
        response_200 = DestinationView.from_dict(response.json())



        return response_200

    if response.status_code == 201:
        response_201 = DestinationView.from_dict(response.json())



        return response_201

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

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())



        return response_409

    if response.status_code == 412:
        response_412 = Problem.from_dict(response.json())



        return response_412

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[DestinationView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: DestinationPut,
    if_match: str | Unset = UNSET,
    if_none_match: str | Unset = UNSET,

) -> Response[DestinationView | Problem]:
    """ `PUT /v1/destinations/{name}`.

    Args:
        name (str):
        if_match (str | Unset):
        if_none_match (str | Unset):
        body (DestinationPut): A destination as `PUT` gives it: the whole of it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DestinationView | Problem]
     """


    kwargs = _get_kwargs(
        name=name,
body=body,
if_match=if_match,
if_none_match=if_none_match,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: DestinationPut,
    if_match: str | Unset = UNSET,
    if_none_match: str | Unset = UNSET,

) -> DestinationView | Problem | None:
    """ `PUT /v1/destinations/{name}`.

    Args:
        name (str):
        if_match (str | Unset):
        if_none_match (str | Unset):
        body (DestinationPut): A destination as `PUT` gives it: the whole of it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DestinationView | Problem
     """


    return sync_detailed(
        name=name,
client=client,
body=body,
if_match=if_match,
if_none_match=if_none_match,

    ).parsed

async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: DestinationPut,
    if_match: str | Unset = UNSET,
    if_none_match: str | Unset = UNSET,

) -> Response[DestinationView | Problem]:
    """ `PUT /v1/destinations/{name}`.

    Args:
        name (str):
        if_match (str | Unset):
        if_none_match (str | Unset):
        body (DestinationPut): A destination as `PUT` gives it: the whole of it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DestinationView | Problem]
     """


    kwargs = _get_kwargs(
        name=name,
body=body,
if_match=if_match,
if_none_match=if_none_match,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: DestinationPut,
    if_match: str | Unset = UNSET,
    if_none_match: str | Unset = UNSET,

) -> DestinationView | Problem | None:
    """ `PUT /v1/destinations/{name}`.

    Args:
        name (str):
        if_match (str | Unset):
        if_none_match (str | Unset):
        body (DestinationPut): A destination as `PUT` gives it: the whole of it.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DestinationView | Problem
     """


    return (await asyncio_detailed(
        name=name,
client=client,
body=body,
if_match=if_match,
if_none_match=if_none_match,

    )).parsed
