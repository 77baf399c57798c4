"""The OpenAPI schema is the service's contract: schemathesis (examples, coverage and fuzzing phases, every
check) runs against the ASGI app of a small served index, in-process, and finds nothing: no server error, no
response that breaks its declared schema, no schema-invalid request accepted, no schema-valid request refused
but for its content, and an Allow header that names the path's methods.

"But for its content": a query whose language cannot be told, or none of whose words the model knows, passes
any schema yet cannot be searched; the schema says so in its 422 description. Those refusals, and only those,
are let through (CONTENT_REFUSALS). Upload parts are declared image/*; the test generates real JPEGs for them
(schemathesis's media-type hook), as a client would send.
"""

from __future__ import annotations

import io
import time

import pytest
import schemathesis
from PIL import Image

import polyvse
from polyvse.index import CaptionCollection, PhotoIndex, Searcher, read_caption_file
from polyvse_app.service import ServeSettings, create_app
from test_index import serving_assets

#: what a 422 for a schema-valid request may say: the query's words or language, not its form
CONTENT_REFUSALS = (
    "the language of",
    "the query looks like",
    "none of the model's languages",
    "none of the words of the query",
)
MAX_EXAMPLES = 12  # per operation and phase: ~300 requests, under half a minute on a busy 2-core machine


@pytest.fixture(scope="module")
def app(shared_data, tmp_path_factory):
    assets = serving_assets(shared_data, tmp_path_factory)
    searcher = Searcher(polyvse.load(assets.checkpoint), PhotoIndex.open(assets.index))
    captions_file = tmp_path_factory.mktemp("schema-caps") / "captions.jsonl"
    captions_file.write_text(
        '{"lang": "en", "caption": "a dog runs on the grass"}\n'
        '{"lang": "de", "caption": "ein Hund spielt im Schnee"}\n',
        encoding="utf-8",
    )
    captions = CaptionCollection(searcher, read_caption_file(captions_file))
    real_photos = [p.read_bytes() for p in assets.photos[:3]]
    return create_app(searcher, captions, ServeSettings(max_upload_bytes=2_000_000)), real_photos


def jpeg_strategy(real_photos: list[bytes]):
    """Real photos of the collection, or small plain JPEGs of any size and colour."""
    from hypothesis import strategies as st

    def plain(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
        buf = io.BytesIO()
        Image.new("RGB", (width, height), rgb).save(buf, format="JPEG")
        return buf.getvalue()

    channel = st.integers(0, 255)
    return st.sampled_from(real_photos) | st.builds(
        plain, st.integers(1, 300), st.integers(1, 300), st.tuples(channel, channel, channel)
    )


def content_refusal(detail: str) -> bool:
    return any(fragment in detail for fragment in CONTENT_REFUSALS)


def valid_as_sent(app, case) -> bool:
    """Whether a multipart body schemathesis made invalid is valid as it goes on the wire, where an empty list
    or object sends no part at all (schemathesis's own guard for that cannot validate a file part's bytes)."""
    import jsonschema_rs

    content = case.operation.definition.raw.get("requestBody", {}).get("content", {})
    if case.media_type != "multipart/form-data" or not isinstance(case.body, dict):
        return False
    name = content[case.media_type]["schema"]["$ref"].rsplit("/", 1)[-1]
    schema = app.openapi()["components"]["schemas"][name]
    sent = {k: ("x" * len(v) if isinstance(v, bytes) else v) for k, v in case.body.items() if v not in ([], {})}
    return jsonschema_rs.validator_for(schema).is_valid(sent)


def run_schemathesis(app, real_photos) -> tuple[int, list[str]]:
    """(requests sent, one line per failure) of a seeded schemathesis run over every operation."""
    from schemathesis.config import SchemathesisConfig
    from schemathesis.engine import events

    schemathesis.openapi.media_type("image/jpeg", jpeg_strategy(real_photos))
    config = SchemathesisConfig.from_dict(
        {
            "seed": 24,
            "generation": {"max-examples": MAX_EXAMPLES},
        }
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
    requests, failures = 0, []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, (events.NonFatalError, events.FatalError)):
            failures.append(f"schemathesis error: {getattr(event, 'info', None) or event}")
        if not isinstance(event, events.ScenarioFinished):
            continue
        requests += len(event.recorder.interactions)
        for case_id, checks in event.recorder.checks.items():
            for check in checks:
                if check.status.name != "FAILURE":
                    continue
                case = event.recorder.cases[case_id].value
                response = event.recorder.interactions[case_id].response
                detail = ""
                if response is not None and response.status_code == 422:
                    try:
                        detail = response.json().get("detail", "")
                    except ValueError:
                        pass
                if check.name == "positive_data_acceptance" and content_refusal(str(detail)):
                    continue
                if check.name == "negative_data_rejection" and valid_as_sent(app, case):
                    continue
                failures.append(
                    f"{check.name}: {case.method} {case.formatted_path} query={case.query} "
                    f"body={shown(case.body)} -> {response.status_code if response else None} "
                    f"{str(detail)[:160]}"
                )
    return requests, sorted(set(failures))


def shown(body) -> str:
    """A generated body for a failure message: a form's file part by its size and first bytes."""
    if isinstance(body, dict):
        return repr({k: (f"<{len(v)} bytes {v[:8]!r}>" if isinstance(v, bytes) else v) for k, v in body.items()})
    return repr(body)[:200]


def test_schemathesis_finds_nothing(app):
    t0 = time.time()
    requests, failures = run_schemathesis(*app)
    assert not failures, f"{len(failures)} schemathesis failures:\n" + "\n".join(failures)
    assert requests >= 200, f"only {requests} requests: the run did not cover the API"
    assert time.time() - t0 < 150


def test_the_schema_declares_the_limits(app):
    """What the run above relies on, spelled out: each limit the server checks is in the schema."""
    schema = app[0].openapi()
    components = schema["components"]["schemas"]

    def param(path, name, method="get"):
        return next(p["schema"] for p in schema["paths"][path][method]["parameters"] if p["name"] == name)

    def form(path):
        ref = schema["paths"][path]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
        return components[ref.rsplit("/", 1)[-1]]["properties"]

    assert (param("/api/search/text", "k")["minimum"], param("/api/search/text", "k")["maximum"]) == (1, 100)
    q = param("/api/search/text", "q")
    assert (q["minLength"], q["maxLength"], q["pattern"]) == (1, 1000, r"[^\s\x1c-\x1f]")
    assert components["TextSearchRequest"]["properties"]["query"]["maxLength"] == 1000
    assert param("/api/search/text", "lang")["enum"] == ["en", "de", "zh", "auto"]
    assert param("/api/photos/{photo_id}/captions", "lang")["enum"] == ["de", "en"]  # the collection's
    size = param("/api/photos/{photo_id}/thumbnail", "size")
    assert components[size["$ref"].rsplit("/", 1)[-1]]["enum"] == [64, 128, 192, 256, 384, 512]
    assert param("/api/photos/{photo_id}", "photo_id")["minimum"] == 0
    upload = form("/api/search/image")
    assert (upload["file"]["minLength"], upload["file"]["maxLength"]) == (1, 2_000_000)
    assert {"type": "string", "maxLength": 0} in upload["k"]["anyOf"]  # an empty form field is the default
