from enum import StrEnum


class AuditActionName(StrEnum):
    PROVIDER_KEY_ADDED = "provider_key.added"
    PROVIDER_KEY_REMOVED = "provider_key.removed"
    PROVIDER_KEY_UPDATED = "provider_key.updated"
    TOKEN_CREATED = "token.created"
    TOKEN_REVOKED = "token.revoked"
    TOKEN_ROTATED = "token.rotated"
    WEBHOOK_CREATED = "webhook.created"
    WEBHOOK_DELETED = "webhook.deleted"
    WORLD_CREATED = "world.created"
    WORLD_DELETED = "world.deleted"
    WORLD_REINGESTED = "world.reingested"
    WORLD_REINGEST_DISCARDED = "world.reingest_discarded"
    WORLD_REINGEST_PROMOTED = "world.reingest_promoted"
    WORLD_REPAIRED = "world.repaired"
    WORLD_UPDATED = "world.updated"

    def __str__(self) -> str:
        return str(self.value)
