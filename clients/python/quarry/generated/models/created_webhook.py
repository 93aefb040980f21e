from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.webhook_event_name import WebhookEventName
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreatedWebhook")


@_attrs_define
class CreatedWebhook:
    """A new subscription, with its signing secret — the only time quarry shows it.

    Attributes:
        created_at (datetime.datetime):
        events (list[WebhookEventName]):
        url (str): The receiver. Shown whole only when the subscription is created; afterwards, as a URL
            may carry a receiver's token, each query value reads `redacted`.
        webhook_id (UUID):
        secret (str): Verify each delivery's `webhook-signature` with it (any Standard Webhooks library does). Example:
            whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw.
        description (None | str | Unset):
        world_id (None | Unset | UUID): `null`: every world's jobs.
    """

    created_at: datetime.datetime
    events: list[WebhookEventName]
    url: str
    webhook_id: UUID
    secret: str
    description: None | str | Unset = UNSET
    world_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        events = []
        for events_item_data in self.events:
            events_item = events_item_data.value
            events.append(events_item)

        url = self.url

        webhook_id = str(self.webhook_id)

        secret = self.secret

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        world_id: None | str | Unset
        if isinstance(self.world_id, Unset):
            world_id = UNSET
        elif isinstance(self.world_id, UUID):
            world_id = str(self.world_id)
        else:
            world_id = self.world_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "events": events,
                "url": url,
                "webhook_id": webhook_id,
                "secret": secret,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if world_id is not UNSET:
            field_dict["world_id"] = world_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        events = []
        _events = d.pop("events")
        for events_item_data in _events:
            events_item = WebhookEventName(events_item_data)

            events.append(events_item)

        url = d.pop("url")

        webhook_id = UUID(d.pop("webhook_id"))

        secret = d.pop("secret")

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        def _parse_world_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                world_id_type_0 = UUID(data)

                return world_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        world_id = _parse_world_id(d.pop("world_id", UNSET))

        created_webhook = cls(
            created_at=created_at,
            events=events,
            url=url,
            webhook_id=webhook_id,
            secret=secret,
            description=description,
            world_id=world_id,
        )

        created_webhook.additional_properties = d
        return created_webhook

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
