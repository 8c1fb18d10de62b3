"""The Python example backend end to end, as ExampleBackendTests runs the
Swift one: a real siwa (`siwa-demo --serve`: serve with sign-in on, its
worker, the Apple simulator) delivering its app events to the example app
(app.py, a process of its own), which signs users in through siwa with the
generated client. scripts/test-python-example.sh starts them and sets
SIWA_EXAMPLE_E2E=1 with siwa-demo's env file's settings, EXAMPLE_URL and
EXAMPLE_LOG; without SIWA_EXAMPLE_E2E these tests are skipped."""
import base64
import json
import os
import re
import time
from datetime import datetime, timezone

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from siwaclient import AuthenticatedClient
from siwaclient.api.api import get_user
from siwaclient.models import User

NEEDED = ["SIWA_API_URL", "SIWA_APP_KEY", "SIWA_ADMIN_URL", "SIWA_ADMIN_KEY", "APPLE_URL", "SIWA_CLIENT_ID",
          "SIWA_APP_WEBHOOK_SECRET", "EXAMPLE_URL", "EXAMPLE_LOG"]

if not os.environ.get("SIWA_EXAMPLE_E2E"):
    pytest.skip("the end-to-end run is scripts/test-python-example.sh's", allow_module_level=True)
missing = [name for name in NEEDED if not os.environ.get(name)]
if missing:
    raise RuntimeError(f"SIWA_EXAMPLE_E2E is set but not {missing}")
env = os.environ


def eventually(check, seconds, what):
    """Poll `check` until it answers truthily; fail naming `what` at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s: {what}\n--- the example's log:\n{example_log()[-3000:]}")
        time.sleep(0.2)


def example_log():
    with open(env["EXAMPLE_LOG"], encoding="utf-8", errors="replace") as handle:
        return handle.read()


def apple_credential(sub):
    """What Apple hands the app at sign-in (the simulator's own endpoint)."""
    answer = httpx.post(f"{env['APPLE_URL']}/simulator/authorize", timeout=10, params={
        "sub": sub, "client_id": env["SIWA_CLIENT_ID"], "email": f"{sub}@privaterelay.appleid.com",
        "given_name": "Ada", "family_name": "Lovelace"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def example(method, path, session=None, headers=None, **arguments):
    headers = {**(headers or {}), **({"Authorization": f"Bearer {session}"} if session else {})}
    return httpx.request(method, env["EXAMPLE_URL"] + path, headers=headers, timeout=30, **arguments)


def app_event_jobs():
    """siwa's app_event deliveries, from its admin listener."""
    answer = httpx.get(f"{env['SIWA_ADMIN_URL']}/admin/jobs", params={"kind": "app_event", "limit": 1000},
                       headers={"Authorization": f"Bearer {env['SIWA_ADMIN_KEY']}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["jobs"]


def handled():
    """The app events the example verified and acted on: (webhook-id, type, sub) from its log."""
    return [match.groups() for match in re.finditer(r"app event handled id=(\S+) type=(\S+) sub=(\S+)", example_log())]


def test_sign_in_look_up_deletion_and_every_app_event_verified():
    # The app signs in with Apple and posts the credential to its backend.
    signed_in = example("POST", "/auth/apple", json=apple_credential("001.python.0001"))
    assert signed_in.status_code == 200 and signed_in.json()["is_new_user"] is True, signed_in.text
    session = signed_in.json()["session"]
    me = example("GET", "/me", session)
    assert me.status_code == 200, me.text
    assert me.json()["apple_sub"] == "001.python.0001" and me.json()["status"] == "active"
    assert me.json()["given_name"] == "Ada", me.json()   # Apple's user object reached siwa
    assert example("GET", "/me", "not-a-session").status_code == 401
    # A credential siwa refuses (a code Apple has seen) is the app's to renew.
    reused = apple_credential("001.python.0009")
    reused["authorization_code"] = "spent-code"
    assert example("POST", "/auth/apple", json=reused).status_code == 401

    # Apple tells siwa the user deleted their Apple Account: siwa's worker
    # tells the backend, which ends the session.
    notified = httpx.post(f"{env['APPLE_URL']}/simulator/notify", timeout=30, params={
        "type": "account-delete", "sub": "001.python.0001", "client_id": env["SIWA_CLIENT_ID"]})
    assert notified.status_code == 200 and notified.json()["status"] == 200, notified.text
    eventually(lambda: example("GET", "/me", session).status_code == 401, 30, "the account-delete ended the session")

    # Another user deletes their account in the app: the backend asks siwa,
    # which revokes and purges, and ends the session at once.
    other = example("POST", "/auth/apple", json=apple_credential("001.python.0002"))
    assert other.status_code == 200, other.text
    other_session = other.json()["session"]
    deleted = example("DELETE", "/me", other_session)
    assert deleted.status_code == 202, deleted.text
    assert example("GET", "/me", other_session).status_code == 401

    # The look-up, with the generated client: the purge completed, the email erased.
    siwa = AuthenticatedClient(base_url=env["SIWA_API_URL"], token=env["SIWA_APP_KEY"])

    def purged():
        user = get_user.sync(apple_sub="001.python.0002", client=siwa)
        return user if isinstance(user, User) and user.purge and user.purge.state.value == "completed" else None
    user = eventually(purged, 60, "GET /v1/users/001.python.0002 answers a completed purge")
    assert user.status.value == "deleted" and user.email is None, user

    # Every event reached the backend verified and was answered 2xx: the
    # sign-ins, Apple's event, the deletion request, both purges.
    expected = {("001.python.0001", "user.signed_in"), ("001.python.0001", "apple.account-delete"),
                ("001.python.0001", "purge.completed"), ("001.python.0002", "user.signed_in"),
                ("001.python.0002", "user.deletion_requested"), ("001.python.0002", "purge.completed")}

    def all_delivered():
        # (Apple's consent-revoked, which follows siwa's revocation, may still
        # be on its way: the story is read when siwa's jobs hold still.)
        before = app_event_jobs()
        seen = handled()
        after = app_event_jobs()
        sent = {(job.get("apple_sub"), job.get("event_type")) for job in after}
        done = before == after and expected <= sent and all(job["state"] == "completed" for job in after)
        # One handled event per delivery: each verified and acted on once.
        return (after, seen) if done and len({event_id for event_id, _, _ in seen}) == len(after) else None
    jobs, seen = eventually(all_delivered, 60, f"siwa delivered {sorted(expected)}, each delivery completed and handled once")
    assert all(job["attempt"] == 1 for job in jobs), [job for job in jobs if job["attempt"] != 1]
    assert {(sub, kind) for _, kind, sub in seen} >= expected, seen
    assert "app event refused" not in example_log()


def signed_delivery(secret, body, when=None, msg_id="evt_999999_1"):
    when = when or datetime.now(tz=timezone.utc)
    text = json.dumps(body)
    return text, {"webhook-id": msg_id, "webhook-timestamp": str(int(when.timestamp())),
                  "webhook-signature": Webhook(secret).sign(msg_id, when, text), "content-type": "application/json"}


def test_a_forged_or_tampered_event_is_refused_and_a_signed_one_taken():
    event = {"type": "siwa.test", "timestamp": "2026-11-26T08:00:00Z", "data": {"message": "from the test"}}
    forger = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    text, headers = signed_delivery(forger, event, msg_id="evt_999990_1")
    assert example("POST", "/siwa/events", content=text, headers=headers).status_code == 401
    text, headers = signed_delivery(env["SIWA_APP_WEBHOOK_SECRET"], event, msg_id="evt_999991_1")
    tampered = text.replace("from the test", "from someone else")
    assert example("POST", "/siwa/events", content=tampered, headers=headers).status_code == 401
    old = datetime.fromtimestamp(time.time() - 600, tz=timezone.utc)
    text, headers = signed_delivery(env["SIWA_APP_WEBHOOK_SECRET"], event, when=old, msg_id="evt_999992_1")
    assert example("POST", "/siwa/events", content=text, headers=headers).status_code == 401
    assert not any(event_id.startswith("evt_99999") for event_id, _, _ in handled())
    # Signed with siwa's secret: taken.
    text, headers = signed_delivery(env["SIWA_APP_WEBHOOK_SECRET"], event, msg_id="evt_999993_1")
    assert example("POST", "/siwa/events", content=text, headers=headers).status_code == 204
    assert ("evt_999993_1", "siwa.test", "None") in handled()
