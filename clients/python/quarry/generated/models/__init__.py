"""Contains all the data models used in inputs/outputs"""

from .add_source_request import AddSourceRequest
from .add_source_upload import AddSourceUpload
from .audit_action_name import AuditActionName
from .audit_actor import AuditActor
from .audit_event import AuditEvent
from .audit_list import AuditList
from .breaker import Breaker
from .breaker_state import BreakerState
from .budget_delta import BudgetDelta
from .budget_scores import BudgetScores
from .check import Check
from .chunk import Chunk
from .chunk_error import ChunkError
from .chunk_list import ChunkList
from .chunking_profile import ChunkingProfile
from .chunking_request import ChunkingRequest
from .cluster import Cluster
from .collection_drift import CollectionDrift
from .create_key_request import CreateKeyRequest
from .create_token_request import CreateTokenRequest
from .create_webhook_request import CreateWebhookRequest
from .create_world_request import CreateWorldRequest
from .created_token import CreatedToken
from .created_webhook import CreatedWebhook
from .current_token import CurrentToken
from .delivery import Delivery
from .delivery_list import DeliveryList
from .delivery_status_name import DeliveryStatusName
from .dimension_range import DimensionRange
from .embedding_profile import EmbeddingProfile
from .embedding_provider import EmbeddingProvider
from .embedding_request import EmbeddingRequest
from .error_body import ErrorBody
from .error_code import ErrorCode
from .error_detail import ErrorDetail
from .error_detail_details_type_0 import ErrorDetailDetailsType0
from .eval_comparison import EvalComparison
from .eval_item import EvalItem
from .eval_run import EvalRun
from .eval_run_list import EvalRunList
from .eval_run_progress import EvalRunProgress
from .eval_run_report import EvalRunReport
from .eval_run_request import EvalRunRequest
from .eval_run_setting import EvalRunSetting
from .eval_run_settings_item import EvalRunSettingsItem
from .eval_run_status import EvalRunStatus
from .eval_set import EvalSet
from .eval_set_list import EvalSetList
from .eval_set_request import EvalSetRequest
from .eval_set_summary import EvalSetSummary
from .expected import Expected
from .gate_metric import GateMetric
from .gate_state import GateState
from .health import Health
from .hit_explanation import HitExplanation
from .item_change_dto import ItemChangeDto
from .item_scores import ItemScores
from .job import Job
from .job_counts import JobCounts
from .job_error import JobError
from .job_kind import JobKind
from .job_list import JobList
from .job_status import JobStatus
from .key_list import KeyList
from .key_provider import KeyProvider
from .measured_index import MeasuredIndex
from .metadata import Metadata
from .metadata_filter import MetadataFilter
from .model import Model
from .model_list import ModelList
from .node_state import NodeState
from .outcome import Outcome
from .outcome_dto import OutcomeDto
from .pending_version import PendingVersion
from .provider import Provider
from .provider_key import ProviderKey
from .provider_key_status import ProviderKeyStatus
from .provider_list import ProviderList
from .put_source_by_key_if_none_match import PutSourceByKeyIfNoneMatch
from .rank_standing import RankStanding
from .readiness import Readiness
from .reingest_gate import ReingestGate
from .reingest_gate_request import ReingestGateRequest
from .reingest_request import ReingestRequest
from .removed_candidate import RemovedCandidate
from .replica import Replica
from .retrieval_citation import RetrievalCitation
from .retrieval_context import RetrievalContext
from .retrieval_corpus import RetrievalCorpus
from .retrieval_explanation import RetrievalExplanation
from .retrieval_fusion import RetrievalFusion
from .retrieval_parent import RetrievalParent
from .retrieval_quality import RetrievalQuality
from .retrieval_repair import RetrievalRepair
from .retrieval_result import RetrievalResult
from .retrieval_result_metadata import RetrievalResultMetadata
from .retrieval_timing import RetrievalTiming
from .retrieval_warning import RetrievalWarning
from .retrieve_expand import RetrieveExpand
from .retrieve_filter import RetrieveFilter
from .retrieve_fusion import RetrieveFusion
from .retrieve_fusion_method import RetrieveFusionMethod
from .retrieve_mode import RetrieveMode
from .retrieve_request import RetrieveRequest
from .retrieve_rerank import RetrieveRerank
from .retrieve_response import RetrieveResponse
from .retry_failed import RetryFailed
from .scope_name import ScopeName
from .setting_delta_dto import SettingDeltaDto
from .setting_drift import SettingDrift
from .setting_scores import SettingScores
from .source import Source
from .source_accepted import SourceAccepted
from .source_list import SourceList
from .source_metadata import SourceMetadata
from .suggest_request import SuggestRequest
from .suggested_eval_set import SuggestedEvalSet
from .token import Token
from .token_list import TokenList
from .update_key_request import UpdateKeyRequest
from .update_world_request import UpdateWorldRequest
from .update_world_request_chunking_type_0 import UpdateWorldRequestChunkingType0
from .update_world_request_embedding_type_0 import UpdateWorldRequestEmbeddingType0
from .wait_reason import WaitReason
from .waiting import Waiting
from .webhook import Webhook
from .webhook_event_name import WebhookEventName
from .webhook_list import WebhookList
from .world import World
from .world_list import WorldList
from .world_stats import WorldStats

__all__ = (
    "AddSourceRequest",
    "AddSourceUpload",
    "AuditActionName",
    "AuditActor",
    "AuditEvent",
    "AuditList",
    "Breaker",
    "BreakerState",
    "BudgetDelta",
    "BudgetScores",
    "Check",
    "Chunk",
    "ChunkError",
    "ChunkList",
    "ChunkingProfile",
    "ChunkingRequest",
    "Cluster",
    "CollectionDrift",
    "CreateKeyRequest",
    "CreateTokenRequest",
    "CreateWebhookRequest",
    "CreateWorldRequest",
    "CreatedToken",
    "CreatedWebhook",
    "CurrentToken",
    "Delivery",
    "DeliveryList",
    "DeliveryStatusName",
    "DimensionRange",
    "EmbeddingProfile",
    "EmbeddingProvider",
    "EmbeddingRequest",
    "ErrorBody",
    "ErrorCode",
    "ErrorDetail",
    "ErrorDetailDetailsType0",
    "EvalComparison",
    "EvalItem",
    "EvalRun",
    "EvalRunList",
    "EvalRunProgress",
    "EvalRunReport",
    "EvalRunRequest",
    "EvalRunSetting",
    "EvalRunSettingsItem",
    "EvalRunStatus",
    "EvalSet",
    "EvalSetList",
    "EvalSetRequest",
    "EvalSetSummary",
    "Expected",
    "GateMetric",
    "GateState",
    "Health",
    "HitExplanation",
    "ItemChangeDto",
    "ItemScores",
    "Job",
    "JobCounts",
    "JobError",
    "JobKind",
    "JobList",
    "JobStatus",
    "KeyList",
    "KeyProvider",
    "MeasuredIndex",
    "Metadata",
    "MetadataFilter",
    "Model",
    "ModelList",
    "NodeState",
    "Outcome",
    "OutcomeDto",
    "PendingVersion",
    "Provider",
    "ProviderKey",
    "ProviderKeyStatus",
    "ProviderList",
    "PutSourceByKeyIfNoneMatch",
    "RankStanding",
    "Readiness",
    "ReingestGate",
    "ReingestGateRequest",
    "ReingestRequest",
    "RemovedCandidate",
    "Replica",
    "RetrievalCitation",
    "RetrievalContext",
    "RetrievalCorpus",
    "RetrievalExplanation",
    "RetrievalFusion",
    "RetrievalParent",
    "RetrievalQuality",
    "RetrievalRepair",
    "RetrievalResult",
    "RetrievalResultMetadata",
    "RetrievalTiming",
    "RetrievalWarning",
    "RetrieveExpand",
    "RetrieveFilter",
    "RetrieveFusion",
    "RetrieveFusionMethod",
    "RetrieveMode",
    "RetrieveRequest",
    "RetrieveRerank",
    "RetrieveResponse",
    "RetryFailed",
    "ScopeName",
    "SettingDeltaDto",
    "SettingDrift",
    "SettingScores",
    "Source",
    "SourceAccepted",
    "SourceList",
    "SourceMetadata",
    "SuggestRequest",
    "SuggestedEvalSet",
    "Token",
    "TokenList",
    "UpdateKeyRequest",
    "UpdateWorldRequest",
    "UpdateWorldRequestChunkingType0",
    "UpdateWorldRequestEmbeddingType0",
    "WaitReason",
    "Waiting",
    "Webhook",
    "WebhookEventName",
    "WebhookList",
    "World",
    "WorldList",
    "WorldStats",
)
