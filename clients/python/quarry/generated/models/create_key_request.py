from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.key_provider import KeyProvider
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateKeyRequest")


@_attrs_define
class CreateKeyRequest:
    """
    Attributes:
        provider (KeyProvider): The providers that take keys.
        secret (str): The API key, exactly as the provider issued it: 1 to 1024 visible ASCII characters
            (`!` to `~`), no whitespace (it is sent in an HTTP header). Stored encrypted; never
            returned. Example: AIza....
        label (None | str | Unset): At most 200 characters as sent, no control characters; stored without surrounding
            whitespace, and a blank label is none (the key is then named after its fingerprint). Example: team-a.
        quota_group (None | str | Unset): Keys of one quota group (e.g. one Google Cloud project) share one quota: a
            rate limit on
            one cools them all down. As `label`: at most 200 characters, no control characters, blank
            is none. Example: project-1.
    """

    provider: KeyProvider
    secret: str
    label: None | str | Unset = UNSET
    quota_group: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        provider = self.provider.value

        secret = self.secret

        label: None | str | Unset
        if isinstance(self.label, Unset):
            label = UNSET
        else:
            label = self.label

        quota_group: None | str | Unset
        if isinstance(self.quota_group, Unset):
            quota_group = UNSET
        else:
            quota_group = self.quota_group

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "provider": provider,
                "secret": secret,
            }
        )
        if label is not UNSET:
            field_dict["label"] = label
        if quota_group is not UNSET:
            field_dict["quota_group"] = quota_group

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        provider = KeyProvider(d.pop("provider"))

        secret = d.pop("secret")

        def _parse_label(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        label = _parse_label(d.pop("label", UNSET))

        def _parse_quota_group(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        quota_group = _parse_quota_group(d.pop("quota_group", UNSET))

        create_key_request = cls(
            provider=provider,
            secret=secret,
            label=label,
            quota_group=quota_group,
        )

        return create_key_request
