"""The generated client and the example's event check, without siwa: the
client decodes answers and events with fields the document does not list,
the committed client is what openapi-python-client makes of the document
now, the documents are valid OpenAPI, and the webhook route takes siwa's
signature and refuses any other."""
import asyncio
import base64
import filecmp
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
import yaml
from conftest import EXAMPLE, REPOSITORY
from standardwebhooks.webhooks import Webhook

import app as example
from siwaclient import AuthenticatedClient
from siwaclient.api.api import get_user, sign_in
from siwaclient.models import SignedInUser, SignInRequest, User, UserSignedInEvent

DOCUMENT = REPOSITORY / "docs/openapi.yaml"
RENDERING = REPOSITORY / "docs/openapi-3.0.yaml"

SIGNED_IN = {
    "user_id": 7, "apple_sub": "001.a.1", "team": "TEAM123456", "client_id": "com.example.app", "is_new_user": True,
    "status": "active", "email": None, "email_verified": None, "is_private_email": None, "given_name": "Ada",
    "family_name": None, "real_user_status": 2, "refresh_token_stored": False,
}
USER = {
    "user_id": 7, "apple_sub": "001.a.1", "team": "TEAM123456", "client_id": None, "status": "active",
    "email": None, "email_verified": None, "is_private_email": None, "email_forwarding_enabled": True,
    "given_name": None, "family_name": None, "real_user_status": None, "org_id": None,
    "created_at": "2026-11-23T15:10:57.150Z", "last_sign_in_at": None,
    "refresh_token": {"stored": True, "last_validated_at": None},
    "purge": {"job_id": 3, "state": "completed", "waiting": False, "run_at": None},
}


def siwa_answering(status, body):
    """The generated client, against a stand-in for siwa that answers `body`."""
    def answer(request):
        return httpx.Response(status, json=body, headers={"Cache-Control": "no-store"})
    return AuthenticatedClient(base_url="http://siwa.test", token="siwa_key",
                               httpx_args={"transport": httpx.MockTransport(answer)})


# ----------------------------------------- a field the document does not list --

def test_the_client_decodes_a_sign_in_answer_with_a_field_the_document_does_not_list():
    client = siwa_answering(200, {**SIGNED_IN, "added_in_a_later_siwa": {"any": "thing"}})
    answer = sign_in.sync_detailed(client=client, body=SignInRequest(identity_token="x"))
    assert answer.status_code == 200
    assert isinstance(answer.parsed, SignedInUser), answer.parsed
    assert answer.parsed.user_id == 7 and answer.parsed.given_name == "Ada"
    assert answer.parsed.additional_properties == {"added_in_a_later_siwa": {"any": "thing"}}


def test_the_client_decodes_a_user_with_unlisted_fields_at_every_level():
    body = {**USER, "new_top": 1, "refresh_token": {**USER["refresh_token"], "new_inner": 2},
            "purge": {**USER["purge"], "new_purge": 3}}
    answer = get_user.sync_detailed(apple_sub="001.a.1", client=siwa_answering(200, body))
    assert isinstance(answer.parsed, User), answer.parsed
    assert answer.parsed.additional_properties == {"new_top": 1}
    assert answer.parsed.refresh_token.additional_properties == {"new_inner": 2}
    assert answer.parsed.purge.additional_properties == {"new_purge": 3}
    assert answer.parsed.purge.state.value == "completed"


def test_an_event_with_an_unlisted_field_decodes():
    event = UserSignedInEvent.from_dict({
        "type": "user.signed_in", "timestamp": "2026-11-26T08:00:00.035000Z", "later": True,
        "data": {"sub": "001.a.1", "user_id": 7, "is_new_user": True, "refresh_token_stored": False, "later": 1},
    })
    assert event.data.user_id == 7 and event.data.additional_properties == {"later": 1}
    assert event.timestamp == datetime(2026, 11, 26, 8, 0, 0, 35000, tzinfo=timezone.utc)


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def strict_places(node, where=""):
    if isinstance(node, dict):
        if node.get("additionalProperties") is False:
            yield where or "/"
        for key, value in node.items():
            yield from strict_places(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from strict_places(value, f"{where}/{index}")


@pytest.mark.parametrize("path", [DOCUMENT, RENDERING], ids=lambda path: path.name)
def test_no_published_schema_refuses_an_unlisted_field(path):
    assert list(strict_places(load(path))) == []


# ------------------------------------------------- the documents, the client --

@pytest.mark.parametrize("path", [DOCUMENT, RENDERING], ids=lambda path: path.name)
def test_the_documents_are_valid_openapi(path):
    from openapi_spec_validator import validate
    document = load(path)
    assert document["openapi"] == ("3.1.0" if path == DOCUMENT else "3.0.3")
    validate(document)


def test_the_committed_client_is_what_the_generator_makes_of_the_document_now():
    out = REPOSITORY / ".build/python-example-generated"
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    # The generator's post hooks are ruff's (the one requirements-dev.txt pins), without a cache in the output.
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "RUFF_NO_CACHE": "true"}
    run = subprocess.run(
        [str(bin_dir / "openapi-python-client"), "generate", "--path", str(DOCUMENT),
         "--config", str(EXAMPLE / "openapi-python-client.yaml"), "--meta", "none",
         "--output-path", str(out / "siwaclient"), "--fail-on-warning"],
        env=environment, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    differences = []

    def compare(comparison, where):
        differences.extend(f"{where}{name}" for name in
                           comparison.diff_files + comparison.left_only + comparison.right_only)
        for name, sub in comparison.subdirs.items():
            compare(sub, f"{where}{name}/")

    compare(filecmp.dircmp(EXAMPLE / "siwaclient", out / "siwaclient", ignore=["__pycache__"]), "")
    assert differences == [], (f"examples/python/siwaclient is not the client of docs/openapi.yaml now ({differences}): "
                               "regenerate it as examples/python/README.md says and commit it")


def test_the_event_models_are_the_documents_app_events():
    document = load(DOCUMENT)
    webhooks = {name: item for name, item in document["webhooks"].items()
                if item.get("x-siwa-receiver", "app") == "app"}
    schema_of = {name: item["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
                 for name, item in webhooks.items()}
    mapping = {kind: ref.rsplit("/", 1)[-1]
               for kind, ref in document["components"]["schemas"]["AppEvent"]["discriminator"]["mapping"].items()}
    assert {kind: model.__name__ for kind, model in example.EVENT_MODELS.items()} == mapping
    assert {kind: schema for kind, schema in schema_of.items() if kind != "apple.other"} == mapping
    assert example.event_model("apple.something-new").__name__ == schema_of["apple.other"]
    assert example.event_model("user.something_new") is None


# ------------------------------------------------------- the webhook route --

def delivery(body, secret=None, msg_id=None, when=None):
    msg_id = msg_id or f"evt_{uuid.uuid4().int % 10**9}_1"
    when = when or datetime.now(tz=timezone.utc)
    text = json.dumps(body)
    signature = Webhook(secret or os.environ["EXAMPLE_WEBHOOK_SECRET"]).sign(msg_id, when, text)
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(int(when.timestamp())), "webhook-signature": signature,
               "content-type": "application/json"}
    return text, headers


EVENT = {"type": "apple.account-delete", "timestamp": "2026-11-26T08:00:00Z",
         "data": {"sub": "001.unit.1", "team": "TEAM123456", "apple_type": "account-delete", "purge": True,
                  "older_than_sign_in": False, "jti": "j1", "event_time": 1795680000000}}


class AppClient:
    """The example app in process (httpx's ASGI transport), called synchronously."""

    def post(self, path, content, headers):
        async def send():
            transport = httpx.ASGITransport(app=example.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://example.test") as http:
                return await http.post(path, content=content, headers=headers)
        return asyncio.run(send())


@pytest.fixture
def client():
    example.accounts = example.Accounts()
    example.accounts.start_session(("001.unit.1", "TEAM123456"), 1, None)
    return AppClient()


def test_a_signed_event_is_acted_on_once(client):
    text, headers = delivery(EVENT)
    assert client.post("/siwa/events", content=text, headers=headers).status_code == 204
    assert ("001.unit.1", "TEAM123456") not in example.accounts.users   # Apple's account-delete: deleted
    example.accounts.start_session(("001.unit.1", "TEAM123456"), 1, None)
    assert client.post("/siwa/events", content=text, headers=headers).status_code == 204   # seen: skipped
    assert ("001.unit.1", "TEAM123456") in example.accounts.users


@pytest.mark.parametrize("how", ["another secret", "tampered body", "an hour old", "no signature", "malformed signature"])
def test_a_forged_or_tampered_event_is_refused(client, how):
    other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    text, headers = delivery(EVENT, secret=other if how == "another secret" else None,
                             when=datetime.fromtimestamp(time.time() - 3600, tz=timezone.utc) if how == "an hour old" else None)
    if how == "tampered body":
        text = text.replace("001.unit.1", "001.unit.2")
    if how == "no signature":
        del headers["webhook-signature"]
    if how == "malformed signature":
        headers["webhook-signature"] = "v1"
    assert client.post("/siwa/events", content=text, headers=headers).status_code == 401
    assert ("001.unit.1", "TEAM123456") in example.accounts.users   # nothing acted on


def test_an_event_of_a_type_this_backend_does_not_know_is_taken(client):
    text, headers = delivery({"type": "user.something_new", "timestamp": "2026-11-26T08:00:00Z", "data": {"sub": "x"}})
    assert client.post("/siwa/events", content=text, headers=headers).status_code == 204
