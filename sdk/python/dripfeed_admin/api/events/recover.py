from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.recover import Recover
from ...models.sent_again import SentAgain
from typing import cast



def _get_kwargs(
    app: str,
    name: str,
    *,
    body: Recover,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/applications/{app}/endpoints/{name}/recover".format(app=quote(str(app), safe=""),name=quote(str(name), safe=""),),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | SentAgain | None:
    if response.status_code == 202:
        response_202 = SentAgain.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | SentAgain]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    app: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Recover,

) -> Response[Problem | SentAgain]:
    """ `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Args:
        app (str):
        name (str):
        body (Recover): `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SentAgain]
     """


    kwargs = _get_kwargs(
        app=app,
name=name,
body=body,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    app: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Recover,

) -> Problem | SentAgain | None:
    """ `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Args:
        app (str):
        name (str):
        body (Recover): `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SentAgain
     """


    return sync_detailed(
        app=app,
name=name,
client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    app: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Recover,

) -> Response[Problem | SentAgain]:
    """ `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Args:
        app (str):
        name (str):
        body (Recover): `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SentAgain]
     """


    kwargs = _get_kwargs(
        app=app,
name=name,
body=body,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    app: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Recover,

) -> Problem | SentAgain | None:
    """ `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Args:
        app (str):
        name (str):
        body (Recover): `POST /v1/applications/{app}/endpoints/{name}/recover`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SentAgain
     """


    return (await asyncio_detailed(
        app=app,
name=name,
client=client,
body=body,

    )).parsed
