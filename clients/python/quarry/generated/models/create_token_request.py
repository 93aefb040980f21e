from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.scope_name import ScopeName
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateTokenRequest")


@_attrs_define
class CreateTokenRequest:
    """
    Attributes:
        name (str): 1 to 200 characters, not all blank, no control characters. Example: support bot.
        scopes (list[ScopeName]): `read` (retrieve; list and read worlds, sources, chunks, jobs, events; MCP), `ingest`
            (`read`, and write sources and steer jobs), `admin` (everything) and `metrics` (read
            `/metrics`). At least one.
        expires_at (datetime.datetime | None | Unset): When it stops being accepted; left out: never.
        rate_per_minute (int | None | Unset): Requests a minute the token may make on each replica (1 to 1000000; up to
            ten seconds'
            worth at once); past it, 429 `token_rate_limited` with `Retry-After`. Left out: no limit
            of its own.
        worlds (list[UUID] | None | Unset): The worlds the token may touch; left out: every world (or, when the caller's
            own token is
            limited, the caller's worlds). Worlds it creates join the list.
    """

    name: str
    scopes: list[ScopeName]
    expires_at: datetime.datetime | None | Unset = UNSET
    rate_per_minute: int | None | Unset = UNSET
    worlds: list[UUID] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        scopes = []
        for scopes_item_data in self.scopes:
            scopes_item = scopes_item_data.value
            scopes.append(scopes_item)

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        rate_per_minute: int | None | Unset
        if isinstance(self.rate_per_minute, Unset):
            rate_per_minute = UNSET
        else:
            rate_per_minute = self.rate_per_minute

        worlds: list[str] | None | Unset
        if isinstance(self.worlds, Unset):
            worlds = UNSET
        elif isinstance(self.worlds, list):
            worlds = []
            for worlds_type_0_item_data in self.worlds:
                worlds_type_0_item = str(worlds_type_0_item_data)
                worlds.append(worlds_type_0_item)

        else:
            worlds = self.worlds

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "scopes": scopes,
            }
        )
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if rate_per_minute is not UNSET:
            field_dict["rate_per_minute"] = rate_per_minute
        if worlds is not UNSET:
            field_dict["worlds"] = worlds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        scopes = []
        _scopes = d.pop("scopes")
        for scopes_item_data in _scopes:
            scopes_item = ScopeName(scopes_item_data)

            scopes.append(scopes_item)

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        def _parse_rate_per_minute(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rate_per_minute = _parse_rate_per_minute(d.pop("rate_per_minute", UNSET))

        def _parse_worlds(data: object) -> list[UUID] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                worlds_type_0 = []
                _worlds_type_0 = data
                for worlds_type_0_item_data in _worlds_type_0:
                    worlds_type_0_item = UUID(worlds_type_0_item_data)

                    worlds_type_0.append(worlds_type_0_item)

                return worlds_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[UUID] | None | Unset, data)

        worlds = _parse_worlds(d.pop("worlds", UNSET))

        create_token_request = cls(
            name=name,
            scopes=scopes,
            expires_at=expires_at,
            rate_per_minute=rate_per_minute,
            worlds=worlds,
        )

        return create_token_request
