"""An app's backend on siwa, in Python: Starlette, the client generated from
docs/openapi.yaml (siwaclient) and the Standard Webhooks check of siwa's app
events (standardwebhooks). The Python twin of siwa-example-backend
(docs/client.md); its storage is in memory.

  POST   /auth/apple    the app posts Apple's credential; siwa signs the user in
  GET    /me            the signed-in user (Authorization: Bearer SESSION), looked up at siwa
  DELETE /me            the in-app account deletion: siwa revokes Apple's tokens and purges
  POST   /siwa/events   siwa's app events (SIWA_APP_WEBHOOK_URL): verified, acted on, 204

Settings: EXAMPLE_API_URL (siwa's API listener), EXAMPLE_API_KEY (an app key,
`siwa api-keys create NAME`), EXAMPLE_WEBHOOK_SECRET (the worker's
SIWA_APP_WEBHOOK_SECRET), EXAMPLE_HOST and EXAMPLE_PORT (127.0.0.1:8090).

    python app.py
"""

import asyncio
import json
import logging
import os
import secrets
from dataclasses import dataclass, field

import httpx
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from siwaclient import AuthenticatedClient
from siwaclient.api.api import delete_user, get_user, sign_in
from siwaclient.models import (
    AppleAccountDeletedEvent,
    AppleAccountDeleteEvent,
    AppleConsentRevokedEvent,
    AppleEmailDisabledEvent,
    AppleEmailEnabledEvent,
    AppleOtherEvent,
    AppleUserObject,
    ConsentRevokedEvent,
    Deletion,
    MovedUser,
    PurgeCancelledEvent,
    PurgeCompletedEvent,
    PurgeFailedEvent,
    SignedInUser,
    SignInRequest,
    SiwaTestEvent,
    TokenInvalidGrantEvent,
    User,
    UserDeletionRequestedEvent,
    UserSignedInEvent,
    UserTransferredEvent,
)
from siwaclient.types import UNSET

log = logging.getLogger("example")

# The app event models by `type` (docs/openapi.yaml's AppEvent union and its
# discriminator; the generator makes no class of a union of its own). An
# `apple.<type>` siwa does not know is an AppleOtherEvent.
EVENT_MODELS = {
    "apple.email-disabled": AppleEmailDisabledEvent,
    "apple.email-enabled": AppleEmailEnabledEvent,
    "apple.consent-revoked": AppleConsentRevokedEvent,
    "apple.account-delete": AppleAccountDeleteEvent,
    "apple.account-deleted": AppleAccountDeletedEvent,
    "consent.revoked": ConsentRevokedEvent,
    "user.signed_in": UserSignedInEvent,
    "user.deletion_requested": UserDeletionRequestedEvent,
    "user.transferred": UserTransferredEvent,
    "purge.completed": PurgeCompletedEvent,
    "purge.failed": PurgeFailedEvent,
    "purge.cancelled": PurgeCancelledEvent,
    "token.invalid_grant": TokenInvalidGrantEvent,
    "siwa.test": SiwaTestEvent,
}


def event_model(kind):
    """The model of an event type, None for a type this code does not know."""
    if kind in EVENT_MODELS:
        return EVENT_MODELS[kind]
    return AppleOtherEvent if isinstance(kind, str) and kind.startswith("apple.") else None


# ------------------------------------------------------------- storage --
# Users by (sub, team): Apple's sub is scoped to a developer team.


@dataclass
class Account:
    user_id: int
    email: str | None
    email_deliverable: bool = True
    sessions: set = field(default_factory=set)


class Accounts:
    """In memory; yours is your database. One event loop: no locks needed."""

    def __init__(self):
        self.users: dict[tuple[str, str], Account] = {}
        self.sessions: dict[str, tuple[str, str]] = {}
        self.seen_event_ids: set[str] = set()

    def start_session(self, key, user_id, email):
        account = self.users.setdefault(key, Account(user_id=user_id, email=email))
        account.user_id, account.email = user_id, email if email is not None else account.email
        token = secrets.token_urlsafe(32)
        account.sessions.add(token)
        self.sessions[token] = key
        return token

    def session(self, token):
        key = self.sessions.get(token)
        return (key, self.users[key]) if key in self.users else None

    def end_sessions(self, key):
        account = self.users.get(key)
        for token in account.sessions if account else ():
            self.sessions.pop(token, None)
        if account:
            account.sessions.clear()

    def delete(self, key):
        self.end_sessions(key)
        self.users.pop(key, None)


# ---------------------------------------------------------------- siwa --


async def call_siwa(operation, **arguments):
    """One /v1 call; a 503 (siwa cannot decide now) is sent again after its
    Retry-After, 3 attempts at most, as docs/http-api.md asks."""
    for attempt in range(3):
        answer = await operation.asyncio_detailed(client=siwa, **arguments)
        if answer.status_code != 503 or attempt == 2:
            return answer
        wait = answer.headers.get("retry-after", "1")
        await asyncio.sleep(min(float(wait) if wait.isdigit() else 1.0, 10.0))


def refusal(answer):
    """siwa's refusal as the app should see it: the app renews Apple's
    credential (400, a stale token), the operator fixes a key or Apple's
    credentials (401, 403, 502)."""
    code = getattr(answer.parsed, "error", None)
    code = getattr(code, "value", code) or "unexpected_answer"
    status = answer.status_code
    if status == 400 or (status == 409 and code == "stale_identity_token"):
        return JSONResponse({"error": code}, status_code=401)
    if status in (404, 409, 503):
        return JSONResponse({"error": code if status != 503 else "unavailable"}, status_code=status)
    log.error("siwa refused the backend: status=%s error=%s", status, code)
    return JSONResponse({"error": "server_error"}, status_code=500)


def signed_in(request):
    header = request.headers.get("authorization", "")
    return accounts.session(header[len("Bearer ") :]) if header.startswith("Bearer ") else None


# -------------------------------------------------------------- routes --


async def auth_apple(request: Request):
    """What the iOS app posts: what ASAuthorizationAppleIDCredential gave it
    (identity_token, authorization_code, the raw nonce, and at the first
    authorization Apple's `user` object)."""
    try:
        credential = await request.json()
        body = SignInRequest(
            identity_token=credential["identity_token"],
            authorization_code=credential.get("authorization_code", UNSET),
            nonce=credential.get("nonce", UNSET),
            user=AppleUserObject.from_dict(credential["user"]) if isinstance(credential.get("user"), dict) else UNSET,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return JSONResponse({"error": "malformed_credential"}, status_code=400)
    try:
        answer = await call_siwa(sign_in, body=body)
    except httpx.HTTPError as error:
        log.error("siwa did not answer the sign-in: %s", error)
        return JSONResponse({"error": "unavailable"}, status_code=503)
    if not isinstance(answer.parsed, SignedInUser):
        return refusal(answer)
    user = answer.parsed
    token = accounts.start_session((user.apple_sub, user.team), user.user_id, user.email)
    return JSONResponse({"session": token, "user_id": user.user_id, "is_new_user": user.is_new_user})


async def me(request: Request):
    found = signed_in(request)
    if found is None:
        return JSONResponse({"error": "sign_in_required"}, status_code=401)
    (sub, team), account = found
    if request.method == "DELETE":
        return await delete_account(sub, team)
    # What siwa knows of the user now (GET /v1/users/{apple_sub}).
    try:
        answer = await call_siwa(get_user, apple_sub=sub, team=team)
    except httpx.HTTPError as error:
        log.error("siwa did not answer the look-up: %s", error)
        return JSONResponse({"error": "unavailable"}, status_code=503)
    if isinstance(answer.parsed, MovedUser):
        return JSONResponse({"error": "moved", "moved_to": answer.parsed.moved_to}, status_code=409)
    if not isinstance(answer.parsed, User):
        return refusal(answer)
    user = answer.parsed
    return JSONResponse({
        "user_id": account.user_id, "apple_sub": sub, "email": account.email,
        "email_deliverable": account.email_deliverable, "status": user.status.value,
        "given_name": user.given_name,
    })


async def delete_account(sub, team):
    """The user deleted their account in the app: siwa revokes their Apple
    tokens and purges; the sessions end now (user.deletion_requested and
    purge.completed follow)."""
    try:
        answer = await call_siwa(delete_user, apple_sub=sub, team=team)
    except httpx.HTTPError as error:
        log.error("siwa did not answer the deletion: %s", error)
        return JSONResponse({"error": "unavailable"}, status_code=503)
    if not isinstance(answer.parsed, Deletion):
        return refusal(answer)
    accounts.delete((sub, team))
    # No token to revoke (`manual`): the app shows the user this link.
    url = answer.parsed.apple_revocation_url
    return JSONResponse({"apple_revocation_url": None if url is UNSET else url}, status_code=202)


async def siwa_events(request: Request):
    """siwa's app events: the Standard Webhooks check (HMAC-SHA256 with the
    secret, the timestamp within 5 minutes), a webhook-id seen before
    skipped (at least once), then what docs/app-events.md asks of the app.
    A refusal is 4xx and a failure to act 5xx: siwa retries both, and holds
    the user's later events until this one goes through."""
    body = await request.body()
    if len(body) > 256 * 1024:
        return JSONResponse({"error": "too_large"}, status_code=413)
    try:
        verifier.verify(body, dict(request.headers), json_parse=False)
    except (WebhookVerificationError, ValueError) as error:
        # (A malformed signature header or a body that is no UTF-8 is the
        # library's ValueError rather than its WebhookVerificationError.)
        log.warning("app event refused: %s", error or type(error).__name__)
        return JSONResponse({"error": "bad_signature"}, status_code=401)
    try:
        payload = json.loads(body)
    except ValueError:
        log.warning("app event refused: malformed body")
        return JSONResponse({"error": "malformed_body"}, status_code=400)
    event_id = request.headers["webhook-id"]
    if event_id in accounts.seen_event_ids:
        log.info("app event seen before id=%s", event_id)
        return Response(status_code=204)
    kind = payload.get("type") if isinstance(payload, dict) else None
    model = event_model(kind)
    if model is None:
        # A type a newer siwa sends: nothing to do yet, and never a refusal
        # (that would hold up the user's later events).
        log.info("app event of a type this backend does not know id=%s type=%s", event_id, kind)
        accounts.seen_event_ids.add(event_id)
        return Response(status_code=204)
    try:
        event = model.from_dict(payload)
    except (KeyError, ValueError, TypeError, AttributeError) as error:
        log.warning("app event refused: malformed body (%s)", error)
        return JSONResponse({"error": "malformed_body"}, status_code=400)
    act(event_id, event)
    accounts.seen_event_ids.add(event_id)
    return Response(status_code=204)


def act(event_id, event):
    """What each event asks of the app's backend (docs/app-events.md, "What
    Apple asks of the app, event by event")."""
    data = event.data
    sub = getattr(data, "sub", None)
    team = getattr(data, "team", UNSET)
    key = (sub, team)
    if isinstance(event, AppleEmailDisabledEvent) and key in accounts.users:
        accounts.users[key].email_deliverable = False
    elif isinstance(event, AppleEmailEnabledEvent) and key in accounts.users:
        accounts.users[key].email_deliverable = True
    elif isinstance(event, AppleConsentRevokedEvent) and data.older_than_sign_in:
        pass  # the user signed in again after it: siwa ignored it too
    elif isinstance(event, (AppleConsentRevokedEvent, ConsentRevokedEvent, AppleAccountDeleteEvent,
                            AppleAccountDeletedEvent, UserDeletionRequestedEvent, PurgeCompletedEvent)):
        # TN3194: delete the user's data and revert every client to an
        # unauthenticated state; siwa revokes Apple's tokens and purges.
        accounts.delete(key)
    elif isinstance(event, TokenInvalidGrantEvent):
        # Apple no longer honours the user's token: end the sessions, keep the data.
        accounts.end_sessions(key)
    elif isinstance(event, UserTransferredEvent):
        previous = (data.previous_sub, data.previous_team)
        if previous in accounts.users:
            accounts.users[key] = accounts.users.pop(previous)
    elif isinstance(event, PurgeFailedEvent):
        log.error("siwa's purge of a user failed: the data is not erased yet (siwa jobs show, siwa jobs retry) "
                  "sub=%s job_id=%s", sub, data.job_id)
    # user.signed_in, purge.cancelled, siwa.test, apple.<other>: nothing asked.
    log.info("app event handled id=%s type=%s sub=%s", event_id, event.type_, sub)


async def healthz(request: Request):
    return JSONResponse({"status": "ok"})


def settings(name, default=None):
    value = os.environ.get(name, default)
    if not value:
        raise SystemExit(f"{name}: is required (see the top of app.py)")
    return value


siwa = AuthenticatedClient(base_url=settings("EXAMPLE_API_URL"), token=settings("EXAMPLE_API_KEY"),
                           timeout=httpx.Timeout(15.0), raise_on_unexpected_status=False)
verifier = Webhook(settings("EXAMPLE_WEBHOOK_SECRET"))
accounts = Accounts()
app = Starlette(routes=[
    Route("/auth/apple", auth_apple, methods=["POST"]),
    Route("/me", me, methods=["GET", "DELETE"]),
    Route("/siwa/events", siwa_events, methods=["POST"]),
    Route("/healthz", healthz, methods=["GET"]),
])

if __name__ == "__main__":
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(app, host=os.environ.get("EXAMPLE_HOST", "127.0.0.1"), port=int(os.environ.get("EXAMPLE_PORT", "8090")),
                log_level="info")
