from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.webhook_event_name import WebhookEventName
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateWebhookRequest")


@_attrs_define
class CreateWebhookRequest:
    """
    Attributes:
        url (str): Where deliveries are POSTed: an absolute `http` or `https` URL of at most 2048
            characters, as a source's `url` (a host name or IP address, no user information, no
            whitespace or control characters). Example: https://hooks.example.com/quarry.
        description (None | str | Unset): At most 200 characters, no control characters; blank is none. Example: CI
            notifications.
        events (list[WebhookEventName] | None | Unset): The events to deliver; left out: all of them. `job.waiting` is
            sent when a running job
            starts waiting for a minute or more (or for as long as nobody knows), e.g. for a spent
            daily quota or with no usable key left; `job.held` when a gated re-ingest is held.
        secret (None | str | Unset): The signing secret, `whsec_` and the padded standard base64 of 24 to 64 bytes; left
            out: quarry makes one (32 random bytes). Stored encrypted under `security.master_key`;
            returned only in this response. Example: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw.
        world_id (None | Unset | UUID): Only this world's jobs; left out: every world's.
    """

    url: str
    description: None | str | Unset = UNSET
    events: list[WebhookEventName] | None | Unset = UNSET
    secret: None | str | Unset = UNSET
    world_id: None | Unset | UUID = UNSET

    def to_dict(self) -> dict[str, Any]:
        url = self.url

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        events: list[str] | None | Unset
        if isinstance(self.events, Unset):
            events = UNSET
        elif isinstance(self.events, list):
            events = []
            for events_type_0_item_data in self.events:
                events_type_0_item = events_type_0_item_data.value
                events.append(events_type_0_item)

        else:
            events = self.events

        secret: None | str | Unset
        if isinstance(self.secret, Unset):
            secret = UNSET
        else:
            secret = self.secret

        world_id: None | str | Unset
        if isinstance(self.world_id, Unset):
            world_id = UNSET
        elif isinstance(self.world_id, UUID):
            world_id = str(self.world_id)
        else:
            world_id = self.world_id

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "url": url,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if events is not UNSET:
            field_dict["events"] = events
        if secret is not UNSET:
            field_dict["secret"] = secret
        if world_id is not UNSET:
            field_dict["world_id"] = world_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        url = d.pop("url")

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        def _parse_events(data: object) -> list[WebhookEventName] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                events_type_0 = []
                _events_type_0 = data
                for events_type_0_item_data in _events_type_0:
                    events_type_0_item = WebhookEventName(events_type_0_item_data)

                    events_type_0.append(events_type_0_item)

                return events_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[WebhookEventName] | None | Unset, data)

        events = _parse_events(d.pop("events", UNSET))

        def _parse_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        secret = _parse_secret(d.pop("secret", UNSET))

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

        create_webhook_request = cls(
            url=url,
            description=description,
            events=events,
            secret=secret,
            world_id=world_id,
        )

        return create_webhook_request
