"""Contains all the data models used in inputs/outputs"""

from .accepted_notification import AcceptedNotification
from .accepted_notification_status import AcceptedNotificationStatus
from .app_event_envelope import AppEventEnvelope
from .app_event_envelope_data import AppEventEnvelopeData
from .apple_account_delete_event import AppleAccountDeleteEvent
from .apple_account_deleted_event import AppleAccountDeletedEvent
from .apple_consent_revoked_event import AppleConsentRevokedEvent
from .apple_email_disabled_event import AppleEmailDisabledEvent
from .apple_email_enabled_event import AppleEmailEnabledEvent
from .apple_event_data import AppleEventData
from .apple_notification_body import AppleNotificationBody
from .apple_other_event import AppleOtherEvent
from .apple_rejected_client import AppleRejectedClient
from .apple_user_object import AppleUserObject
from .apple_user_object_name import AppleUserObjectName
from .attention_item import AttentionItem
from .audit_entry import AuditEntry
from .audit_log import AuditLog
from .audit_summary import AuditSummary
from .bad_parameter import BadParameter
from .body_too_large import BodyTooLarge
from .cancel_job_body import CancelJobBody
from .chain_verification import ChainVerification
from .chain_verification_head_type_0 import ChainVerificationHeadType0
from .consent_revoked_event import ConsentRevokedEvent
from .consent_revoked_event_data import ConsentRevokedEventData
from .consent_revoked_event_data_source import ConsentRevokedEventDataSource
from .cursor_expired import CursorExpired
from .day_summary import DaySummary
from .day_summary_notifications_by_type import DaySummaryNotificationsByType
from .day_summary_rejections_by_reason import DaySummaryRejectionsByReason
from .deletion import Deletion
from .deletion_apple_revocation import DeletionAppleRevocation
from .deletion_status import DeletionStatus
from .events_feed_refusal import EventsFeedRefusal
from .events_feed_refusal_error import EventsFeedRefusalError
from .events_page import EventsPage
from .feed_event import FeedEvent
from .find_users_by_email_data_body import FindUsersByEmailDataBody
from .find_users_by_email_json_body import FindUsersByEmailJsonBody
from .find_users_by_email_response_200 import FindUsersByEmailResponse200
from .find_users_by_email_response_200_users_item import (
    FindUsersByEmailResponse200UsersItem,
)
from .forbidden_error import ForbiddenError
from .get_admin_page_notice import GetAdminPageNotice
from .health import Health
from .history_entry import HistoryEntry
from .history_entry_source import HistoryEntrySource
from .identity_token_reason_code import IdentityTokenReasonCode
from .job import Job
from .job_answer import JobAnswer
from .job_change_forbidden_error import JobChangeForbiddenError
from .job_change_forbidden_error_error import JobChangeForbiddenErrorError
from .job_conflict_error import JobConflictError
from .job_kind import JobKind
from .job_list import JobList
from .job_state import JobState
from .method_not_allowed_error import MethodNotAllowedError
from .moved_user import MovedUser
from .not_found import NotFound
from .notification_reason_code import NotificationReasonCode
from .notification_refusal import NotificationRefusal
from .purge_cancelled_event import PurgeCancelledEvent
from .purge_cancelled_event_data import PurgeCancelledEventData
from .purge_cancelled_event_data_reason import PurgeCancelledEventDataReason
from .purge_completed_event import PurgeCompletedEvent
from .purge_completed_event_data import PurgeCompletedEventData
from .purge_failed_event import PurgeFailedEvent
from .purge_failed_event_data import PurgeFailedEventData
from .purge_latency import PurgeLatency
from .purge_plan_check_request import PurgePlanCheckRequest
from .purge_plan_step_request import PurgePlanStepRequest
from .purge_scope import PurgeScope
from .readiness import Readiness
from .readiness_apple_keys import ReadinessAppleKeys
from .readiness_database import ReadinessDatabase
from .readiness_schema import ReadinessSchema
from .readiness_status import ReadinessStatus
from .receipt_key_set import ReceiptKeySet
from .receipt_key_set_keys_item import ReceiptKeySetKeysItem
from .receipt_list import ReceiptList
from .retry_job_body import RetryJobBody
from .run_job_now_body import RunJobNowBody
from .sign_in_conflict import SignInConflict
from .sign_in_conflict_error import SignInConflictError
from .sign_in_reason_code import SignInReasonCode
from .sign_in_refusal import SignInRefusal
from .sign_in_request import SignInRequest
from .signed_in_user import SignedInUser
from .siwa_test_event import SiwaTestEvent
from .siwa_test_event_data import SiwaTestEventData
from .team_refusal import TeamRefusal
from .team_refusal_error import TeamRefusalError
from .token_invalid_grant_event import TokenInvalidGrantEvent
from .token_invalid_grant_event_data import TokenInvalidGrantEventData
from .too_many_failures_error import TooManyFailuresError
from .unauthorized_error import UnauthorizedError
from .unavailable import Unavailable
from .user import User
from .user_deletion_requested_event import UserDeletionRequestedEvent
from .user_deletion_requested_event_data import UserDeletionRequestedEventData
from .user_purge_type_0 import UserPurgeType0
from .user_purge_type_0_state import UserPurgeType0State
from .user_refresh_token import UserRefreshToken
from .user_report import UserReport
from .user_signed_in_event import UserSignedInEvent
from .user_signed_in_event_data import UserSignedInEventData
from .user_status import UserStatus
from .user_transferred_event import UserTransferredEvent
from .user_transferred_event_data import UserTransferredEventData
from .user_transferred_event_data_via import UserTransferredEventDataVia
from .waiting_purge import WaitingPurge

__all__ = (
    "AcceptedNotification",
    "AcceptedNotificationStatus",
    "AppEventEnvelope",
    "AppEventEnvelopeData",
    "AppleAccountDeleteEvent",
    "AppleAccountDeletedEvent",
    "AppleConsentRevokedEvent",
    "AppleEmailDisabledEvent",
    "AppleEmailEnabledEvent",
    "AppleEventData",
    "AppleNotificationBody",
    "AppleOtherEvent",
    "AppleRejectedClient",
    "AppleUserObject",
    "AppleUserObjectName",
    "AttentionItem",
    "AuditEntry",
    "AuditLog",
    "AuditSummary",
    "BadParameter",
    "BodyTooLarge",
    "CancelJobBody",
    "ChainVerification",
    "ChainVerificationHeadType0",
    "ConsentRevokedEvent",
    "ConsentRevokedEventData",
    "ConsentRevokedEventDataSource",
    "CursorExpired",
    "DaySummary",
    "DaySummaryNotificationsByType",
    "DaySummaryRejectionsByReason",
    "Deletion",
    "DeletionAppleRevocation",
    "DeletionStatus",
    "EventsFeedRefusal",
    "EventsFeedRefusalError",
    "EventsPage",
    "FeedEvent",
    "FindUsersByEmailDataBody",
    "FindUsersByEmailJsonBody",
    "FindUsersByEmailResponse200",
    "FindUsersByEmailResponse200UsersItem",
    "ForbiddenError",
    "GetAdminPageNotice",
    "Health",
    "HistoryEntry",
    "HistoryEntrySource",
    "IdentityTokenReasonCode",
    "Job",
    "JobAnswer",
    "JobChangeForbiddenError",
    "JobChangeForbiddenErrorError",
    "JobConflictError",
    "JobKind",
    "JobList",
    "JobState",
    "MethodNotAllowedError",
    "MovedUser",
    "NotFound",
    "NotificationReasonCode",
    "NotificationRefusal",
    "PurgeCancelledEvent",
    "PurgeCancelledEventData",
    "PurgeCancelledEventDataReason",
    "PurgeCompletedEvent",
    "PurgeCompletedEventData",
    "PurgeFailedEvent",
    "PurgeFailedEventData",
    "PurgeLatency",
    "PurgePlanCheckRequest",
    "PurgePlanStepRequest",
    "PurgeScope",
    "Readiness",
    "ReadinessAppleKeys",
    "ReadinessDatabase",
    "ReadinessSchema",
    "ReadinessStatus",
    "ReceiptKeySet",
    "ReceiptKeySetKeysItem",
    "ReceiptList",
    "RetryJobBody",
    "RunJobNowBody",
    "SignInConflict",
    "SignInConflictError",
    "SignInReasonCode",
    "SignInRefusal",
    "SignInRequest",
    "SignedInUser",
    "SiwaTestEvent",
    "SiwaTestEventData",
    "TeamRefusal",
    "TeamRefusalError",
    "TokenInvalidGrantEvent",
    "TokenInvalidGrantEventData",
    "TooManyFailuresError",
    "UnauthorizedError",
    "Unavailable",
    "User",
    "UserDeletionRequestedEvent",
    "UserDeletionRequestedEventData",
    "UserPurgeType0",
    "UserPurgeType0State",
    "UserRefreshToken",
    "UserReport",
    "UserSignedInEvent",
    "UserSignedInEventData",
    "UserStatus",
    "UserTransferredEvent",
    "UserTransferredEventData",
    "UserTransferredEventDataVia",
    "WaitingPurge",
)
