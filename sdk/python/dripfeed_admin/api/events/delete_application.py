from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.application_deleted import ApplicationDeleted
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    app: str,
    *,
    if_match: str | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["If-Match"] = if_match



    

    

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/applications/{app}".format(app=quote(str(app), safe=""),),
    }


    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ApplicationDeleted | Problem | None:
    if response.status_code == 200:
        response_200 = ApplicationDeleted.from_dict(response.json())



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

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())



        return response_409

    if response.status_code == 412:
        response_412 = Problem.from_dict(response.json())



        return response_412

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[ApplicationDeleted | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    app: str,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,

) -> Response[ApplicationDeleted | Problem]:
    """ `DELETE /v1/applications/{app}`.

    Args:
        app (str):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ApplicationDeleted | Problem]
     """


    kwargs = _get_kwargs(
        app=app,
if_match=if_match,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    app: str,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,

) -> ApplicationDeleted | Problem | None:
    """ `DELETE /v1/applications/{app}`.

    Args:
        app (str):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ApplicationDeleted | Problem
     """


    return sync_detailed(
        app=app,
client=client,
if_match=if_match,

    ).parsed

async def asyncio_detailed(
    app: str,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,

) -> Response[ApplicationDeleted | Problem]:
    """ `DELETE /v1/applications/{app}`.

    Args:
        app (str):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ApplicationDeleted | Problem]
     """


    kwargs = _get_kwargs(
        app=app,
if_match=if_match,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    app: str,
    *,
    client: AuthenticatedClient,
    if_match: str | Unset = UNSET,

) -> ApplicationDeleted | Problem | None:
    """ `DELETE /v1/applications/{app}`.

    Args:
        app (str):
        if_match (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ApplicationDeleted | Problem
     """


    return (await asyncio_detailed(
        app=app,
client=client,
if_match=if_match,

    )).parsed
