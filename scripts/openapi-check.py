#!/usr/bin/env python3
"""docs/openapi.yaml against what siwa really does.

  openapi-check.py routes DOC            the document's routes by listener, as JSON
                                         ({"public": ["GET /healthz", ...], ...}), for OpenAPITests
  openapi-check.py reasons DOC           every enumerated `error` code of every JSON answer, as JSON
  openapi-check.py json DOC              the document as JSON
  openapi-check.py validate [--coverage] DOC RECORDS
                                         every answer and app event the test suite recorded
                                         (SIWA_TEST_OPENAPI_RECORD, one JSON object a line) against
                                         its schema in DOC; exit 1 naming each that breaks it.
                                         --coverage (the whole suite's run): exit 1 too when a
                                         documented success answer (2XX) or app event was never recorded
  openapi-check.py strict DOC            the document as the check reads it (strict, below), as JSON
  openapi-check.py loose DOC             where DOC says `additionalProperties: false`, as a JSON list
                                         (OpenAPITests: nowhere, in either published document)
  openapi-check.py in-step DOC RENDERED  exit 1 unless RENDERED is scripts/openapi-3.0.py's rendering
                                         of DOC as it is now (OpenAPITests, for docs/openapi-3.0.yaml)

Strict while it validates: the published document says no
`additionalProperties: false` (a client generated from it must keep
decoding when a newer siwa adds a field), but siwa's own answers and events
must hold to it exactly. So the check adds `additionalProperties: false` to
every object schema that lists `properties` and says nothing of other ones
(`additionalProperties`, `patternProperties`, `unevaluatedProperties`), and
an answer with a field the document does not list fails.

Only Debian's python3-yaml and python3-jsonschema (Draft 2020-12, which
OpenAPI 3.1's schemas are); the Makefile installs them (check-openapi).
Schemas are validated with the document's `components` as the root, so a
`$ref: '#/components/...'` resolves with no resolver API (which changed
between jsonschema 4.10, Debian 12's, and later ones).
"""
import json
import re
import sys
from datetime import date, datetime

import jsonschema
import yaml

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
DEFAULT_LISTENER = "public"

FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(text):
    # ISO 8601 in UTC as siwa writes it: 2026-11-23T15:10:57Z, .150Z, .150000Z.
    if not isinstance(text, str):
        return True
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z", text):
        raise ValueError(f"not an ISO 8601 UTC time: {text!r}")
    datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
    return True


@FORMATS.checks("date", raises=ValueError)
def _date(text):
    if isinstance(text, str):
        date.fromisoformat(text)
    return True


@FORMATS.checks("int64")
def _int64(value):
    return not isinstance(value, int) or -(2**63) <= value < 2**63


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


STRICTNESS_KEYS = ("additionalProperties", "patternProperties", "unevaluatedProperties")


def strict(node):
    """The document with `additionalProperties: false` on every object schema
    that lists `properties` and leaves other properties unsaid (a copy)."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    copy = {key: strict(value) for key, value in node.items()}
    properties = copy.get("properties")
    if isinstance(properties, dict) and not any(key in copy for key in STRICTNESS_KEYS):
        copy["additionalProperties"] = False
    return copy


def published_strictness(document):
    """Where the published document itself says `additionalProperties: false`
    (it must not: generated clients would refuse a field siwa adds)."""
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("additionalProperties") is False:
                found.append(where or "/")
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(document, "")
    return found


def is_app_event(item):
    """A `webhooks` entry that is an app event (not a purge plan's http step)."""
    return item.get("x-siwa-receiver", "app") == "app"


def listeners_of(document, path_item):
    servers = path_item.get("servers") or document.get("servers") or []
    names = [server.get("x-siwa-listener") for server in servers]
    return [name for name in names if name] or [DEFAULT_LISTENER]


def resolve(document, node):
    """A `$ref` to a component (responses, parameters, request bodies), followed."""
    while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#/components/") \
            and not node["$ref"].startswith("#/components/schemas/"):
        target = document
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def validator(document, schema):
    root = dict(schema)
    root["components"] = document.get("components", {})
    root.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    return jsonschema.Draft202012Validator(root, format_checker=FORMATS)


def routes(document):
    by_listener = {}
    for path, item in document.get("paths", {}).items():
        for listener in listeners_of(document, item):
            for method in METHODS:
                if method in item:
                    by_listener.setdefault(listener, []).append(f"{method.upper()} {path}")
    return {listener: sorted(found) for listener, found in sorted(by_listener.items())}


def reasons(document):
    """Every string an answer's `error` may be, from every enumeration reachable from one."""
    codes = set()
    schemas = document["components"]["schemas"]

    def strings(schema, seen):
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                strings(schemas[name], seen | {name})
        if "const" in schema and isinstance(schema["const"], str):
            codes.add(schema["const"])
        for value in schema.get("enum", []):
            if isinstance(value, str):
                codes.add(value)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key, []):
                strings(sub, seen)

    def walk(schema, seen):
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                walk(schemas[name], seen | {name})
        error = schema.get("properties", {}).get("error")
        if error is not None:
            strings(error, seen)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key, []):
                walk(sub, seen)

    responses = [response for item in document.get("paths", {}).values() for method in METHODS
                 for response in item.get(method, {}).get("responses", {}).values()]
    # Answers of no one operation (405 method_not_allowed) are components' own.
    responses += document["components"].get("responses", {}).values()
    for response in responses:
        for media in resolve(document, response).get("content", {}).values():
            walk(media.get("schema", {}), frozenset())
    return sorted(codes)


def template_regex(path):
    parts = re.split(r"(\{[^}]+\})", path)
    return re.compile("^" + "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts) + "$")


def find_response(responses, status):
    """The documented key that answers `status` (200, 2XX or default), or None."""
    return next((key for key in (str(status), f"{str(status)[0]}XX", "default") if key in responses), None)


def media_type(content_type):
    return (content_type or "").split(";")[0].strip().lower()


# What the records exercised: (operationId, documented response key) and webhook names.
SEEN = set()


def check_answer(document, operations, record):
    """None, or why the answer breaks the document."""
    listener, method, path = record["listener"], record["method"].lower(), record["path"]
    candidates = [(template, item) for template, item, regex in operations
                  if listener in listeners_of(document, item) and regex.match(path)]
    # A concrete path (/admin/audit/verify) before a template that also matches it.
    candidates.sort(key=lambda found: found[0].count("{"))
    operation = next((item[method] for _, item in candidates if method in item), None)
    if operation is None:
        if candidates:
            # A documented path with a method it does not take: 405, on any route.
            if record["status"] != 405:
                return f"{record['method']} {path} on the {listener} listener: a documented path with another method, yet answered {record['status']} (405 expected)"
            return check_body(document, f"{record['method']} {path}", document["components"]["responses"]["MethodNotAllowed"], record)
        # No route: Hummingbird answers 404, with no body of siwa's.
        if record["status"] != 404:
            return f"{record['method']} {path} on the {listener} listener is no route of the document, yet answered {record['status']}"
        return None
    name = operation.get("operationId", f"{method} {path}")
    key = find_response(operation.get("responses", {}), record["status"])
    if key is None:
        return f"{name}: status {record['status']} is not documented"
    SEEN.add((name, key))
    return check_body(document, name, operation["responses"][key], record)


def check_body(document, name, response, record):
    """None, or why the answer's body breaks the documented `response`."""
    response = resolve(document, response)
    content = response.get("content", {})
    body, kind = record.get("body", ""), media_type(record.get("content_type"))
    if not content:
        if body:
            return f"{name} {record['status']}: documented without a body, answered {kind or 'a body'}: {body[:200]}"
        return None
    if kind not in content:
        return f"{name} {record['status']}: answered {kind or 'no content type'}, documented {sorted(content)}"
    schema = content[kind].get("schema")
    if kind != "application/json" or schema is None:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return f"{name} {record['status']}: not JSON: {body[:200]!r}"
    errors = sorted(validator(document, schema).iter_errors(value), key=lambda error: list(error.absolute_path))
    if errors:
        where = "/".join(str(part) for part in errors[0].absolute_path) or "(the body)"
        return f"{name} {record['status']}: {where}: {errors[0].message[:300]} in {body[:300]}"
    return None


def check_event(document, record):
    try:
        event = json.loads(record["body"])
    except ValueError:
        return f"app event: not JSON: {record['body'][:200]!r}"
    kind = event.get("type") if isinstance(event, dict) else None
    webhooks = {name: item for name, item in document.get("webhooks", {}).items() if is_app_event(item)}
    if kind in webhooks:
        name = kind
    elif isinstance(kind, str) and kind.startswith("apple."):
        name = "apple.other"
    else:
        return f"app event of type {kind!r}: no such webhook in the document"
    operation = webhooks[name]["post"]
    SEEN.add(("webhook", name))
    return check_webhook_request(document, operation, event, record,
                                 f"app event {kind} ({operation['operationId']})", f"app event {kind}")


def check_webhook_request(document, operation, body, record, what, short):
    """A webhook's request against its operation: the headers, then the body."""
    for parameter in operation.get("parameters", []):
        parameter = resolve(document, parameter)
        if parameter.get("in") != "header":
            continue
        value = record.get("headers", {}).get(parameter["name"])
        if value is None:
            if parameter.get("required"):
                return f"{short}: no {parameter['name']} header"
            continue
        errors = list(validator(document, parameter.get("schema", {})).iter_errors(value))
        if errors:
            return f"{short}: header {parameter['name']}: {errors[0].message[:200]}"
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    errors = sorted(validator(document, schema).iter_errors(body), key=lambda error: list(error.absolute_path))
    if errors:
        where = "/".join(str(part) for part in errors[0].absolute_path) or "(the body)"
        return f"{what}: {where}: {errors[0].message[:300]} in {record['body'][:300]}"
    return None


def check_purge_plan_request(document, record):
    """A purge plan http step's request (kind purge_plan): its body and headers."""
    try:
        body = json.loads(record["body"])
    except ValueError:
        return f"purge plan request: not JSON: {record['body'][:200]!r}"
    name = "purge-plan.check" if isinstance(body, dict) and body.get("type") == "siwa.plan_check" else "purge-plan.step"
    operation = document.get("webhooks", {}).get(name, {}).get("post")
    if operation is None:
        return f"purge plan request: no webhook {name} in the document"
    SEEN.add(("webhook", name))
    return check_webhook_request(document, operation, body, record, f"purge plan request {name}", f"purge plan request {name}")


def unexercised(document):
    """The documented success answers and app events no record exercised."""
    missing = []
    for template, item in document.get("paths", {}).items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            name = operation.get("operationId", f"{method} {template}")
            missing += [f"{name} {key}" for key in operation.get("responses", {})
                        if str(key).startswith("2") and (name, key) not in SEEN]
    # The purge plan's entries are checked when a test records them (kind
    # purge_plan), not required: their schemas are the downstream's.
    missing += [f"the app event {name}" for name, item in document.get("webhooks", {}).items()
                if is_app_event(item) and ("webhook", name) not in SEEN]
    return missing


def validate(published, paths, coverage=False):
    for schema in published["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    loose = published_strictness(published)
    document = strict(published)
    operations = [(template, item, template_regex(template)) for template, item in document.get("paths", {}).items()]
    failures, counts = {}, {"answers": 0, "events": 0, "purge_plan": 0}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if record.get("kind") == "event":
                    counts["events"] += 1
                    why = check_event(document, record)
                elif record.get("kind") == "purge_plan":
                    counts["purge_plan"] += 1
                    why = check_purge_plan_request(document, record)
                else:
                    counts["answers"] += 1
                    why = check_answer(document, operations, record)
                if why:
                    # The same break once, with how often and where it first came.
                    failures.setdefault(why, [0, f"{path}:{number}", record.get("test", "")])[0] += 1
    for where in loose:
        # Strict for siwa, tolerant for its clients: see the top of this file.
        failures.setdefault(f"{where}: additionalProperties: false in the published document (the check adds it itself)",
                            [1, "the document", ""])
    for why, (count, where, test) in sorted(failures.items()):
        print(f"openapi: {why} ({count}x; first at {where}{', ' + test if test else ''})", file=sys.stderr)
    plan = f", {counts['purge_plan']} purge plan requests" if counts["purge_plan"] else ""
    print(f"openapi: {counts['answers']} answers and {counts['events']} app events{plan} checked against docs/openapi.yaml; "
          f"{len(failures)} kind(s) of break")
    if not coverage:
        return 1 if failures else 0
    # A documented answer no test ever gave is one nothing checks.
    missing = unexercised(document)
    for what in missing:
        print(f"openapi: no test gave {what}", file=sys.stderr)
    return 1 if failures or missing else 0


def in_step(document, source, rendered_path):
    """0 when rendered_path holds scripts/openapi-3.0.py's rendering of the document, else 1 (and why)."""
    import importlib.util
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("openapi_30", os.path.join(here, "openapi-3.0.py"))
    renderer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(renderer)
    try:
        committed = load(rendered_path)
    except FileNotFoundError:
        committed = None
    if committed != renderer.render(document):
        print(f"openapi: {rendered_path} is not the OpenAPI 3.0 rendering of {source} as it is now: "
              "run scripts/openapi-3.0.py and commit both", file=sys.stderr)
        return 1
    print(f"openapi: {rendered_path} is the rendering of {source}")
    return 0


def main(argv):
    coverage = argv[1:3] == ["validate", "--coverage"]
    if coverage:
        argv = argv[:2] + argv[3:]
    if len(argv) < 3 or argv[1] not in ("routes", "reasons", "json", "strict", "loose", "in-step", "validate"):
        print(__doc__, file=sys.stderr)
        return 2
    document = load(argv[2])
    if argv[1] == "routes":
        print(json.dumps(routes(document)))
        return 0
    if argv[1] == "json":
        print(json.dumps(document, default=str))
        return 0
    if argv[1] == "loose":
        print(json.dumps(published_strictness(document)))
        return 0
    if argv[1] == "in-step":
        if len(argv) != 4:
            print(__doc__, file=sys.stderr)
            return 2
        return in_step(document, argv[2], argv[3])
    if argv[1] == "strict":
        print(json.dumps(strict(document), default=str))
        return 0
    if argv[1] == "reasons":
        print(json.dumps(reasons(document)))
        return 0
    return validate(document, argv[3:], coverage)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
