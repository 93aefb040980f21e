from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.scope_name import ScopeName
from ..types import UNSET, Unset

T = TypeVar("T", bound="CurrentToken")


@_attrs_define
class CurrentToken:
    """The token a request presents, as `GET /v1/token` shows it: what a client (the console) needs
    to know what it may do.

        Attributes:
            name (str): The managed token's name, or `bootstrap`. Example: support bot.
            scopes (list[ScopeName]): A bootstrap token holds every scope.
            expires_at (datetime.datetime | None | Unset): `null`: never.
            id (None | Unset | UUID): `null` for a bootstrap token from `auth.tokens`.
            worlds (list[UUID] | None | Unset): `null`: every world.
    """

    name: str
    scopes: list[ScopeName]
    expires_at: datetime.datetime | None | Unset = UNSET
    id: None | Unset | UUID = UNSET
    worlds: list[UUID] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

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

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        elif isinstance(self.id, UUID):
            id = str(self.id)
        else:
            id = self.id

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
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "scopes": scopes,
            }
        )
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if id is not UNSET:
            field_dict["id"] = id
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

        def _parse_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                id_type_0 = UUID(data)

                return id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        id = _parse_id(d.pop("id", UNSET))

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

        current_token = cls(
            name=name,
            scopes=scopes,
            expires_at=expires_at,
            id=id,
            worlds=worlds,
        )

        current_token.additional_properties = d
        return current_token

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
