from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.breaker import Breaker
    from ..models.provider_key_status import ProviderKeyStatus


T = TypeVar("T", bound="Provider")


@_attrs_define
class Provider:
    """
    Attributes:
        breakers (list[Breaker]): This process's circuit breakers for the provider's models that failed since their last
            success (a closed, healthy breaker is not listed).
        keys (list[ProviderKeyStatus]):
        provider (str):
    """

    breakers: list[Breaker]
    keys: list[ProviderKeyStatus]
    provider: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        breakers = []
        for breakers_item_data in self.breakers:
            breakers_item = breakers_item_data.to_dict()
            breakers.append(breakers_item)

        keys = []
        for keys_item_data in self.keys:
            keys_item = keys_item_data.to_dict()
            keys.append(keys_item)

        provider = self.provider

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "breakers": breakers,
                "keys": keys,
                "provider": provider,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.breaker import Breaker
        from ..models.provider_key_status import ProviderKeyStatus

        d = dict(src_dict)
        breakers = []
        _breakers = d.pop("breakers")
        for breakers_item_data in _breakers:
            breakers_item = Breaker.from_dict(breakers_item_data)

            breakers.append(breakers_item)

        keys = []
        _keys = d.pop("keys")
        for keys_item_data in _keys:
            keys_item = ProviderKeyStatus.from_dict(keys_item_data)

            keys.append(keys_item)

        provider = d.pop("provider")

        provider = cls(
            breakers=breakers,
            keys=keys,
            provider=provider,
        )

        provider.additional_properties = d
        return provider

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
