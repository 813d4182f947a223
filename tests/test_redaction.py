"""Secrets never reach a sink: the built-in patterns, user patterns and functions, and every output."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.exports.bundle import write_bundle
from transcript_otel.model import RawJson
from transcript_otel.reconstruct import read_records
from transcript_otel.redaction import Redactor, marker
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink

from conftest import OTelHarness
from helpers import JSONISH

SECRETS = {
    "openai_key": "sk-proj-4fQ9cX2LmN7pR1sT8vW3yZ6aB0dE5gH2jK",
    "anthropic_key": "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "gitlab_token": "glpat-xY7wV6uT5sR4qP3oN2mL",
    "slack_token": "xoxb-1234567890-abcdefghij",
    "google_api_key": "AIza" + "SyD-1234567890abcdefghijklmnopqrstu",
    "stripe_key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "huggingface_token": "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEF",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private_key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "BG5vbmU=\n-----END OPENSSH PRIVATE KEY-----"
    ),
}
BEARER = "Zm9vYmFyYmF6cXV4cXV1eA.abcdefgh"


@pytest.mark.parametrize(("kind", "secret"), SECRETS.items(), ids=list(SECRETS))
def test_each_built_in_kind_is_replaced_by_a_comparable_marker(kind: str, secret: str) -> None:
    text = f"before {secret} after"
    assert Redactor().text(text) == f"before {marker(kind, secret)} after"
    assert marker(kind, secret).startswith(f"[REDACTED:{kind}:{len(secret)}:")


def test_bearer_and_basic_credentials_lose_only_the_credential() -> None:
    redactor = Redactor()
    assert (
        redactor.text(f"Authorization: Bearer {BEARER}")
        == f"Authorization: Bearer {marker('bearer', BEARER)}"
    )
    assert redactor.text("curl -H 'authorization: basic dXNlcjpwYXNzd29yZDEyMw=='").endswith(
        f"basic {marker('bearer', 'dXNlcjpwYXNzd29yZDEyMw==')}'"
    )


def test_the_same_secret_gives_the_same_marker_and_others_differ() -> None:
    one, two = SECRETS["openai_key"], SECRETS["openai_key"][:-1] + "Z"
    redacted = Redactor().text(f"{one} {one} {two}").split()
    assert redacted[0] == redacted[1] != redacted[2]


@pytest.mark.parametrize(
    "text",
    ["sk-short", "task-ant-colony", "Bearer of good news", "AKIA", "the skeleton key", "eyJ.not.a.jwt", ""],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().text(text) == text


def test_user_patterns_and_functions_come_on_top() -> None:
    def no_employee_ids(text: str) -> str:
        return text.replace("EMP-42", "EMP-??")

    redactor = Redactor([("ticket", r"\bTCK-\d{6}\b")], no_employee_ids)
    key = SECRETS["aws_access_key"]
    assert redactor.text(f"TCK-123456 by EMP-42 with {key}") == (
        f"{marker('ticket', 'TCK-123456')} by EMP-?? with {marker('aws_access_key', key)}"
    )


def test_a_failing_user_function_keeps_the_built_in_redaction() -> None:
    def broken(text: str) -> str:
        raise RuntimeError("oops")

    secret = SECRETS["openai_key"]
    assert Redactor(custom=broken).text(secret) == marker("openai_key", secret)


@pytest.mark.parametrize("kind", ["openai_key", "not an identifier", ""])
def test_a_user_kind_must_be_a_new_identifier(kind: str) -> None:
    with pytest.raises(ValueError, match="a redaction kind must be a new identifier"):
        Redactor([(kind, "x")])


def test_user_rules_copy_values_only_where_they_change() -> None:
    untouched = {"a": ["x", {"b": 1}]}
    detail = {"keep": untouched, "ticket": "TCK-123456", "list": ["ok", "TCK-654321"]}
    redacted = Redactor([("ticket", r"TCK-\d{6}")]).user_value(detail)
    assert redacted["keep"] is untouched
    assert redacted["ticket"] == marker("ticket", "TCK-123456")
    assert redacted["list"] == ["ok", marker("ticket", "TCK-654321")]
    assert detail["ticket"] == "TCK-123456"  # the agent's object is never modified
    cyclic: dict[str, Any] = {"ticket": "TCK-111111"}
    cyclic["self"] = cyclic
    assert Redactor([("ticket", r"TCK-\d{6}")]).user_value(cyclic)["ticket"].startswith("[REDACTED:ticket:")


def test_encoded_json_stays_valid_when_a_key_spans_two_strings() -> None:
    detail = {"a": "-----BEGIN RSA PRIVATE KEY-----", "b": "x", "c": "-----END RSA PRIVATE KEY-----"}
    encoded = json.dumps(detail).encode()
    assert json.loads(Redactor().encoded(encoded)) == detail  # not a key: left whole and valid
    inside = json.dumps({"key": SECRETS["private_key"], "next": 1}).encode()
    assert json.loads(Redactor().encoded(inside)) == {
        "key": marker("private_key", SECRETS["private_key"].replace("\n", "\\n")),
        "next": 1,
    }


@settings(max_examples=200, deadline=None)
@given(JSONISH)
def test_any_value_redacts_to_valid_json(value: Any) -> None:
    redactor = Redactor([("word", r"\bsecret\b")], str.upper)
    redacted = redactor.user_value(value)
    json.loads(redactor.encoded(json.dumps(redacted, default=repr).encode()))


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from(list(SECRETS.values())), st.text())
def test_a_secret_anywhere_in_text_is_gone(before: str, secret: str, after: str) -> None:
    # Alphanumerics glued to a secret can make it part of a longer word; a space keeps it a token.
    assert secret not in Redactor().text(f"{before} {secret} {after}")


# -- every sink ---------------------------------------------------------------------------------


@pytest.fixture
def capture(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> Callable[[], tuple[TranscriptPipeline, list[str]]]:
    """The default pipeline of `configure()`: mirror, log records, span events, redaction on."""

    def build() -> tuple[TranscriptPipeline, list[str]]:
        sinks = [JsonlMirror(runs_dir), OTelLogSink(otel.logger_provider), SpanEventSink()]
        return make_pipeline(sinks), [*SECRETS.values(), BEARER]

    return build


def test_a_secret_in_a_prompt_a_tool_argument_and_a_tool_result_reaches_no_sink(
    capture: Callable[[], tuple[TranscriptPipeline, list[str]]], otel: OTelHarness, tmp_path: Path
) -> None:
    pipeline, secrets = capture()
    prompt = f"Deploy with OPENAI_API_KEY={SECRETS['openai_key']} and Authorization: Bearer {BEARER}"
    arguments = {"command": f"aws s3 ls --key {SECRETS['aws_access_key']}", "token": SECRETS["github_token"]}
    result = f".env:\nANTHROPIC_API_KEY={SECRETS['anthropic_key']}\n{SECRETS['private_key']}"
    with otel.tracer.start_as_current_span("agent"):
        emitter = TranscriptEmitter(prompt_name="deploy", adapter="cli", session_id="s1", pipeline=pipeline)
        with emitter:
            emitter.emit("user_message", detail={"text": prompt}, raw=prompt)
            emitter.emit(
                "tool_use",
                detail={"tool_use_id": "c1", "tool_name": "shell", "input": arguments},
                raw=RawJson({"arguments": arguments}),
            )
            emitter.emit("tool_result", detail={"tool_use_id": "c1", "content": result}, raw=result)
            emitter.emit(
                "assistant_message", detail={"text": f"Used {SECRETS['jwt']} and {SECRETS['slack_token']}"}
            )
    assert emitter.jsonl_path is not None
    mirror = Path(emitter.jsonl_path).read_text(encoding="utf-8")
    logs = json.dumps([dict(log.log_record.attributes) for log in otel.finished_logs()])
    (span,) = otel.finished_spans()
    events = json.dumps([dict(event.attributes) for event in span.events])
    bundle = write_bundle(read_records(emitter.jsonl_path), tmp_path / "run.zip")
    with zipfile.ZipFile(bundle.path) as archive:
        bundled = "".join(archive.read(name).decode("utf-8") for name in archive.namelist())
    for output, name in (
        (mirror, "mirror"),
        (logs, "log records"),
        (events, "span events"),
        (bundled, "bundle"),
    ):
        for secret in secrets:
            for line in secret.splitlines():
                assert line not in output or line.startswith("-----"), (name, line)
        assert "[REDACTED:openai_key:" in output, name
        assert "[REDACTED:private_key:" in output, name
    # What is not secret is all still there, and the records stay valid JSON.
    entries = [r["context"] for r in read_records(emitter.jsonl_path) if r["event"] == "transcript.entry"]
    assert entries[1]["detail"]["input"]["command"].startswith("aws s3 ls --key [REDACTED:aws_access_key:20:")
    assert json.loads(entries[1]["raw"])["arguments"]["token"].startswith("[REDACTED:github_token:40:")
    assert entries[2]["detail"]["content"].startswith(".env:\nANTHROPIC_API_KEY=[REDACTED:anthropic_key:")
