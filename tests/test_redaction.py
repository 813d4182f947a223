"""Secrets never reach a sink: the built-in patterns, user patterns and functions, and every output."""

from __future__ import annotations

import functools
import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.exports.bundle.writer import write_bundle
from transcript_otel.model.entries import RawJson
from transcript_otel.reading.reconstruct import read_records
from transcript_otel.records import redaction
from transcript_otel.records.redaction import Redactor, marker
from transcript_otel.records.redaction_rules import BUILTIN_RULES, BuiltinRule
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
    "npm_token": "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "pypi_token": "pypi-AgEIcHlwaS5vcmcCJDU2NjU0ZjJkLTQ3YjgtNGI2Mi05YjE3LWQxZTk5NzYyN2Q5ZQACKlszLCJmYjE4MTk",
    "groq_key": "gsk_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCb9Aa8Zz7Yy6Xx5Ww4V",
    "sendgrid_key": "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",
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
    # Auth schemes are case-insensitive: upper case is redacted too.
    assert (
        redactor.text(f"AUTHORIZATION: BEARER {BEARER}")
        == f"AUTHORIZATION: BEARER {marker('bearer', BEARER)}"
    )
    assert (
        redactor.text("BASIC dXNlcjpwYXNzd29yZDEyMw==")
        == f"BASIC {marker('bearer', 'dXNlcjpwYXNzd29yZDEyMw==')}"
    )


@pytest.mark.parametrize(
    ("header", "credential"),
    [
        ("Authorization: Basic ", "YWRtaW46YWRtaW4="),  # admin:admin, 16 characters
        ("curl -u: Authorization: basic ", "YTpi"),  # a:b
        ("Authorization: Bearer\t", BEARER),  # a tab after the scheme
        ("BASIC\t", "YWRtaW46YWRtaW4="),
    ],
)
def test_short_basic_credentials_and_a_tab_after_the_scheme_are_redacted(
    header: str, credential: str
) -> None:
    redactor = Redactor()
    assert redactor.text(header + credential) == header + marker("bearer", credential)
    # In encoded JSON the tab is `\t`: the rules read it there too.
    encoded = json.dumps({"header": header + credential}).encode()
    assert json.loads(redactor.encoded(encoded)) == {"header": header + marker("bearer", credential)}


@pytest.mark.parametrize(
    "prose", ["HTTP Basic Auth is on", "a basic idea.", "Basic usage", "basic test", "Basic YWJj"]
)
def test_words_after_basic_are_not_credentials(prose: str) -> None:
    # `YWJj` is base64 of `abc`: no `user:password` in it.
    assert Redactor().text(prose) == prose


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


def test_a_secret_in_an_error_report_reaches_no_sink(
    capture: Callable[[], tuple[TranscriptPipeline, list[str]]], otel: OTelHarness
) -> None:
    """`TranscriptEmitter.error()` (and the library's own reports, which quote exception
    messages) are redacted like entries."""
    pipeline, _ = capture()
    key = SECRETS["openai_key"]
    with otel.tracer.start_as_current_span("agent"):
        emitter = TranscriptEmitter(prompt_name="deploy", adapter="cli", session_id="s1", pipeline=pipeline)
        with emitter:
            emitter.error(f"request failed: 401 for key {key}", detail=f"Bearer {BEARER}")
    assert emitter.jsonl_path is not None
    mirror = Path(emitter.jsonl_path).read_text(encoding="utf-8")
    logs = json.dumps([dict(log.log_record.attributes) for log in otel.finished_logs()])
    for output in (mirror, logs):
        assert key not in output
        assert BEARER not in output
    (report,) = [r["context"] for r in read_records(emitter.jsonl_path) if r["event"] == "transcript.error"]
    assert report["error"].startswith("request failed: 401 for key [REDACTED:openai_key:")
    assert report["detail"].startswith("Bearer [REDACTED:")


# -- where the built-in patterns are tried ------------------------------------------------------
# Each pattern runs only, anchored, where one of its literals occurs (`redaction.py`). These
# tests hold that to the plain meaning: every pattern substituted over the whole text, in order.

KEY = SECRETS["openai_key"]
LITERALS = [literal.text for rule in BUILTIN_RULES for literal in rule.literals]


def _marker_bytes(rule: BuiltinRule, match: re.Match[bytes]) -> bytes:
    if rule.accepts is not None and not rule.accepts(match.group()):
        return match.group()
    return marker(rule.kind, match.group().decode("utf-8", "surrogatepass")).encode()


def _whole_text_redaction(data: bytes) -> bytes:
    for rule in BUILTIN_RULES:
        pattern = re.compile(rule.pattern.encode("ascii"))
        data = pattern.sub(functools.partial(_marker_bytes, rule), data)
    return data


# Literals, secrets and what sits around them: escapes, quotes, overlaps (`xoxox`,
# `AKIASIA`, `sk-----BEGIN `), near misses (`task-`), non-ASCII letters.
AROUND = ["task-", "\\n", "\\u001b", '"', "é", "x", "o", "A", "IA", "-", "_", "sk", "k", "Bearer", " "]
# The whole names that shorter literals place (`asic` for `Basic`, `SSW` for `PASSWORD=`, ...).
NAMES = [
    "Basic", "basic", "BASIC", "bearer", "BEARER", "sk_live_", "rk_test_", "sk-ant-", "PASSWORD=", "PASSWD=",
    "AccountKey=", "SharedAccessKey=", "AWS_SECRET_ACCESS_KEY", "API_KEY=", "-----BEGIN ", "github_pat_",
    "GH_TOKEN=", "CLIENT_SECRET=", "aws_secret_access_key",
]  # fmt: skip
# What separates a literal a match follows from the match (the gaps of `_before` in redaction_rules.py).
GAPS = [" ", "\t", "\\t", "=", " = ", "'", '"', '\\"']
FRAGMENTS = st.sampled_from(
    [
        *LITERALS,
        *SECRETS.values(),
        BEARER,
        *AROUND,
        *NAMES,
        *GAPS,
        "0123456789abcdefXYZ",
        "-----END RSA PRIVATE KEY-----",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(FRAGMENTS | st.text(max_size=4), max_size=30))
def test_trying_patterns_at_their_literals_finds_what_a_whole_text_search_finds(parts: list[str]) -> None:
    data = "".join(parts).encode("utf-8", "surrogatepass")
    assert Redactor().encoded(data) == _whole_text_redaction(data)


# URL credentials are placed from the `@`s, not the `://`s (`found_by`): what sits around
# them, up to and past the longest user and password the pattern takes (256 each).
URL_FRAGMENTS = st.sampled_from(
    [
        "://", "https://", "@", "/", ":", '"', "\\", " ", "\\n", "é", "u", "pw", "u:pw", "host",
        "https://u:pw@host/x", "x://a:b@", ":///", "//", "a" * 255, "b" * 256, "c" * 257, ":" + "d" * 256,
    ]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(URL_FRAGMENTS | st.text(max_size=4), max_size=20))
def test_url_credentials_found_from_the_at_signs_are_what_a_whole_text_search_finds(parts: list[str]) -> None:
    data = "".join(parts).encode("utf-8", "surrogatepass")
    assert Redactor().encoded(data) == _whole_text_redaction(data)


@pytest.mark.parametrize("user", [1, 255, 256, 257])
@pytest.mark.parametrize("password", [1, 255, 256, 257])
def test_url_credentials_of_every_length_the_pattern_takes_are_found(user: int, password: int) -> None:
    data = f"https://{'u' * user}:{'p' * password}@host/x".encode()
    assert Redactor().encoded(data) == _whole_text_redaction(data)
    assert (b"[REDACTED:url_credentials:" in Redactor().encoded(data)) == (max(user, password) <= 256)


def test_url_credentials_among_many_urls_are_redacted() -> None:
    urls = [f"https://git.invalid/i/{number}" for number in range(400)]
    text = " ".join([*urls[:200], "https://admin:hunter2@git.example.com/repo", *urls[200:], "a@b"])
    expected = text.replace("admin:hunter2", marker("url_credentials", "admin:hunter2"))
    assert Redactor().text(text) == expected
    encoded = json.dumps({"urls": text}).encode()
    assert json.loads(Redactor().encoded(encoded))["urls"] == expected
    assert Redactor().text(" ".join(urls)) == " ".join(urls)


def test_text_without_any_literal_is_returned_as_is() -> None:
    data = json.dumps({"text": "nothing secret here → ✓ " * 1000}).encode()
    assert Redactor().encoded(data) is data
    text = data.decode()
    assert Redactor().text(text) is text


def test_the_literal_search_stays_within_the_slim_simd_search_and_its_chosen_order() -> None:
    # Past 32 literals ahocorasick-rs's SIMD search takes the fat kind, which costs every text
    # more, and the order of `_SEARCH_ORDER` fills its buckets for the fewest stops: a new
    # literal goes there (benchmarks/literal_buckets.py tells where).
    Redactor()
    searched = redaction._LITERALS[: redaction._SEARCHED]
    assert len(searched) <= 32
    assert set(searched) <= {literal.encode("ascii") for literal in redaction._SEARCH_ORDER}


def test_a_key_right_after_a_json_escape_is_a_key() -> None:
    # In encoded JSON the key follows the escape's last letter (`\nsk-...`, `\u001bsk-...`).
    redactor = Redactor()
    for before in ("\n", "\t", "\r", "\x1b", "\x00", "\\", '"'):
        encoded = json.dumps({"text": f"{before}{KEY}"}).encode()
        assert json.loads(redactor.encoded(encoded)) == {"text": before + marker("openai_key", KEY)}, before
    assert redactor.text(f"ask-proj-{KEY[8:]}") == f"ask-proj-{KEY[8:]}"  # glued to a letter: a word


def _big_text(size: int) -> str:
    line = "tests/test_module_00.py::test_case_0001[cafe-1] PASSED ✓ task-list risk-free [ 1%]\n"
    return (line * (size // len(line) + 1))[:size]


# What a user could find secrets in: (detail, raw, secrets that must be gone, markers that must be there).
EDGE_CASES = {
    "start-and-end-of-a-value": (
        {"first": KEY, "last": f"the key is {KEY}", "only": SECRETS["aws_access_key"]},
        KEY,
        [KEY, SECRETS["aws_access_key"]],
        ["openai_key", "aws_access_key"],
    ),
    "after-json-escapes": (
        {"text": f"keys:\n{KEY}\n\t{SECRETS['github_token']}\r\n\x1b{SECRETS['slack_token']}"},
        RawJson({"lines": [f"\n{SECRETS['anthropic_key']}"]}),
        [KEY, SECRETS["github_token"], SECRETS["slack_token"], SECRETS["anthropic_key"]],
        ["openai_key", "github_token", "slack_token", "anthropic_key"],
    ),
    "many-occurrences-of-literals": (
        {"text": "task-" * 3000 + f" Bearer {BEARER} " + "Bearer of news, " * 500 + KEY + " xoxo" * 200},
        "sk- " * 2000 + SECRETS["stripe_key"],
        [KEY, BEARER, SECRETS["stripe_key"]],
        ["openai_key", "bearer", "stripe_key"],
    ),
    "secrets-in-a-50-kb-value": (
        {
            "output": "\n".join(
                [SECRETS["huggingface_token"], _big_text(25_000), KEY, _big_text(25_000), SECRETS["jwt"]]
            )
        },
        _big_text(50_000) + f"\nAuthorization: Basic {BEARER}",
        [SECRETS["huggingface_token"], KEY, SECRETS["jwt"], BEARER],
        ["huggingface_token", "openai_key", "jwt", "bearer"],
    ),
    "long-secrets-and-hidden-literals": (
        # A key body of 20 KB; a private key whose `-----BEGIN ` overlaps `sk-`; a JWT
        # made of three `eyJ`s; one key right after another.
        {"a": "sk-proj-" + "A" * 20_000, "b": "sk" + SECRETS["private_key"], "c": SECRETS["jwt"] + "." + KEY},
        f"{SECRETS['aws_access_key']},{SECRETS['google_api_key']} {SECRETS['gitlab_token']}",
        ["A" * 20_000, "b3BlbnNzaC1rZXktdjEAAAAA", KEY, SECRETS["aws_access_key"], SECRETS["gitlab_token"]],
        ["openai_key", "private_key", "jwt", "aws_access_key", "google_api_key", "gitlab_token"],
    ),
}


@pytest.mark.parametrize(("detail", "raw", "secrets", "kinds"), EDGE_CASES.values(), ids=list(EDGE_CASES))
def test_what_a_user_sees_holds_markers_and_never_the_secret(
    capture: Callable[[], tuple[TranscriptPipeline, list[str]]],
    otel: OTelHarness,
    detail: dict[str, Any],
    raw: Any,
    secrets: list[str],
    kinds: list[str],
) -> None:
    pipeline, _ = capture()
    with otel.tracer.start_as_current_span("agent"):
        emitter = TranscriptEmitter(prompt_name="edge", adapter="cli", pipeline=pipeline)
        with emitter:
            emitter.emit("tool_result", detail=detail, raw=raw)
    assert emitter.jsonl_path is not None
    (line,) = [
        line
        for line in Path(emitter.jsonl_path).read_text("utf-8").splitlines()
        if "transcript.entry" in line
    ]
    entry = json.loads(line)["context"]
    (log,) = [
        dict(log.log_record.attributes)
        for log in otel.finished_logs()
        if log.log_record.event_name == "transcript.entry"
    ]
    (span,) = otel.finished_spans()
    events = json.dumps([dict(event.attributes) for event in span.events])
    seen = {
        "mirror detail": json.dumps(entry["detail"]),
        "mirror raw": entry["raw"],
        "log detail": log["transcript.detail"],
        "log raw": log["transcript.raw"],
    }
    for secret in secrets:
        for name, output in (*seen.items(), ("span events", events), ("mirror line", line)):
            assert secret not in output, (name, secret[:40])
    both = seen["mirror detail"] + seen["mirror raw"]
    for kind in kinds:
        assert f"[REDACTED:{kind}:" in both, kind
    assert seen["log detail"] == json.dumps(entry["detail"], ensure_ascii=False, separators=(",", ":"))
    assert seen["log raw"] == entry["raw"]


def test_user_patterns_still_apply_beside_the_built_in_ones(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> None:
    redactor = Redactor([("ticket", r"\bTCK-\d{6}\b")], lambda text: text.replace("EMP-42", "EMP-??"))
    pipeline = make_pipeline([JsonlMirror(runs_dir), OTelLogSink(otel.logger_provider)], redactor=redactor)
    text = f"TCK-123456 by EMP-42:\n{KEY}"
    emitter = TranscriptEmitter(prompt_name="user-rules", adapter="cli", pipeline=pipeline)
    with emitter:
        emitter.emit("user_message", detail={"text": text}, raw=text)
    expected = f"{marker('ticket', 'TCK-123456')} by EMP-??:\n{marker('openai_key', KEY)}"
    assert emitter.jsonl_path is not None
    (entry,) = [r["context"] for r in read_records(emitter.jsonl_path) if r["event"] == "transcript.entry"]
    assert entry["detail"] == {"text": expected}
    assert entry["raw"] == expected
    (log,) = [
        log.log_record.attributes
        for log in otel.finished_logs()
        if log.log_record.event_name == "transcript.entry"
    ]
    assert json.loads(log["transcript.detail"]) == {"text": expected}
    assert log["transcript.raw"] == expected


@pytest.mark.parametrize(
    ("text", "after"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7V\nmore lines", ""),  # cut short: no END
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----\nnext",
            "\nnext",
        ),
    ],
    ids=["pem-without-end", "pgp-block"],
)
def test_private_key_blocks_cut_short_or_pgp_are_redacted(text: str, after: str) -> None:
    for redacted in (
        Redactor().text(text),
        json.loads(Redactor().encoded(json.dumps({"t": text}).encode()))["t"],
    ):
        assert redacted.startswith("[REDACTED:private_key:")
        assert redacted.endswith(after)
        assert "MIIEowIBAAKCAQEA7V" not in redacted
        assert "lQOYBF" not in redacted


@pytest.mark.parametrize(
    ("text", "kind", "secret"),
    [
        ("clone https://admin:hunter2@git.example.com/repo", "url_credentials", "admin:hunter2"),
        ("DATABASE_URL=postgres://app:s3cr%40t@db:5432/prod", "url_credentials", "app:s3cr%40t"),
        (
            "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_key",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
            "aws_secret_key",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT5"
            "0uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
            "azure_key",
            "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
        ),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
            "SharedAccessKey=q3uLhWbO2pP0bQh5Vn+3Z2t9Xz1YwA8kC7dE6fG4hJ0=",
            "azure_key",
            "q3uLhWbO2pP0bQh5Vn+3Z2t9Xz1YwA8kC7dE6fG4hJ0=",
        ),
        ("DATABASE_PASSWORD=correct-horse-battery\nDEBUG=1", "secret_assignment", "correct-horse-battery"),
        ("export STRIPE_WEBHOOK_SECRET='whsec_8f2k3m4n5p6q'", "secret_assignment", "whsec_8f2k3m4n5p6q"),
        ('OPENROUTER_API_KEY="or-v1-4b1e9c2d7f3a"', "secret_assignment", "or-v1-4b1e9c2d7f3a"),
        ("docker run -e SENTRY_AUTH_TOKEN=9f8e7d6c5b4a3210 img", "secret_assignment", "9f8e7d6c5b4a3210"),
        ("REDIS_PASSWD=s3cr3tpw", "secret_assignment", "s3cr3tpw"),
    ],
    ids=[
        "https-password",
        "postgres-password",
        "aws-secret-env",
        "aws-secret-credentials-file",
        "azure-storage-account-key",
        "azure-service-bus-shared-access-key",
        "dotenv-password",
        "export-single-quoted-secret",
        "double-quoted-api-key",
        "docker-env-token",
        "passwd",
    ],
)
def test_url_passwords_and_aws_secret_keys_are_redacted(text: str, kind: str, secret: str) -> None:
    expected = text.replace(secret, marker(kind, secret))
    assert Redactor().text(text) == expected
    assert json.loads(Redactor().encoded(json.dumps({"t": text}).encode()))["t"] == expected


@pytest.mark.parametrize(
    "text",
    ["https://example.com/a@b", "git@github.com:org/repo.git", "http://host:8080/path@x", "mailto:a@b.c"],
)
def test_urls_without_a_password_are_left_alone(text: str) -> None:
    assert Redactor().text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "GITHUB_TOKEN=$GITHUB_TOKEN",
        "OPENAI_API_KEY=<your key>",
        "NO_PASSWORD=1",
        "HAS_TOKEN=true",
        "API_KEY=",
        "the MONKEY=banana test",
        "SG.has.no.key",
        "npm_config_cache=/tmp/npm",
        "gsk_short",
        "pypi-token-docs",
    ],
)
def test_assignments_and_prefixes_that_hold_no_secret_are_left_alone(text: str) -> None:
    assert Redactor().text(text) == text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=30), st.sampled_from(list(SECRETS.values())), st.just("https://u:pw@host/x")
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_texts_are_redacted_together_as_each_alone(texts: list[str], user_rules: bool) -> None:
    redactor = Redactor([("ticket", r"TICKET-\d+")] if user_rules else ())
    assert redactor.texts(texts) == [redactor.text(text) for text in texts]


def test_a_span_records_fields_are_redacted(tmp_path: Path) -> None:
    pipeline = TranscriptPipeline([JsonlMirror(tmp_path)])
    try:
        emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
        emitter.start()
        emitter.span_ended(
            {"name": f"execute_tool {SECRETS['github_token']}", "kind": "INTERNAL", "status": "UNSET"},
            Context(),
            1,
        )
        emitter.stop()
    finally:
        pipeline.shutdown()
    (span,) = [r for r in read_records(str(emitter.jsonl_path)) if r["event"] == "transcript.span"]
    assert span["context"]["name"] == f"execute_tool {marker('github_token', SECRETS['github_token'])}"
    assert (span["context"]["kind"], span["context"]["status"]) == ("INTERNAL", "UNSET")
