from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.event_view import EventView
from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    app: str,
    id: str,

) -> dict[str, Any]:
    

    

    

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/applications/{app}/events/{id}".format(app=quote(str(app), safe=""),id=quote(str(id), safe=""),),
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> EventView | Problem | None:
    if response.status_code == 200:
        response_200 = EventView.from_dict(response.json())



        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())



        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[EventView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    app: str,
    id: str,
    *,
    client: AuthenticatedClient,

) -> Response[EventView | Problem]:
    """ `GET /v1/applications/{app}/events/{id}`.

    Args:
        app (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EventView | Problem]
     """


    kwargs = _get_kwargs(
        app=app,
id=id,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    app: str,
    id: str,
    *,
    client: AuthenticatedClient,

) -> EventView | Problem | None:
    """ `GET /v1/applications/{app}/events/{id}`.

    Args:
        app (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EventView | Problem
     """


    return sync_detailed(
        app=app,
id=id,
client=client,

    ).parsed

async def asyncio_detailed(
    app: str,
    id: str,
    *,
    client: AuthenticatedClient,

) -> Response[EventView | Problem]:
    """ `GET /v1/applications/{app}/events/{id}`.

    Args:
        app (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[EventView | Problem]
     """


    kwargs = _get_kwargs(
        app=app,
id=id,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    app: str,
    id: str,
    *,
    client: AuthenticatedClient,

) -> EventView | Problem | None:
    """ `GET /v1/applications/{app}/events/{id}`.

    Args:
        app (str):
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        EventView | Problem
     """


    return (await asyncio_detailed(
        app=app,
id=id,
client=client,

    )).parsed
