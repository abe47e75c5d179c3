"""Which ``OTEL_*`` settings turn tracing on, and the one-line errors for those toolmesh
cannot follow — checked on the functions and on a real `toolmesh run` process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import run_toolmesh, start_toolmesh
from toolmesh.telemetry import tracing
from toolmesh.telemetry.tracing import TracingError

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(("environ", "on"), [
    ({}, False),
    (ENDPOINT, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
    ({**ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}, False),
    ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, False),  # an exporter but nowhere to send
])
def test_what_turns_tracing_on(environ: dict[str, str], on: bool) -> None:
    assert tracing.wanted(environ) is on


@pytest.mark.parametrize(("environ", "words"), [
    ({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "'http/protobuf'"),
    ({**ENDPOINT, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "'http/protobuf'"),
    ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "zipkin"}, "'otlp', 'console' and 'none'"),
])
def test_settings_it_cannot_follow_are_refused(environ: dict[str, str], words: str) -> None:
    with pytest.raises(TracingError, match=words):
        tracing.configure(service_name="test", environ=environ)
    assert not tracing.enabled()


def test_off_the_calls_cost_nothing_and_send_nothing() -> None:
    assert not tracing.enabled()
    with tracing.span("anything") as span:
        assert span is None
    properties: dict[str, str] = {}
    tracing.inject(properties)
    assert properties == {} and tracing.mcp_meta() is None and tracing.trace_id() is None


async def test_a_part_refuses_a_protocol_it_cannot_speak() -> None:
    code, _, err = await run_toolmesh(
        "run", "text-completion", timeout=30,
        extra_env={**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[-1].startswith("toolmesh: error: OTEL_EXPORTER_OTLP_PROTOCOL='grpc'"), err
    assert "Traceback" not in err


async def test_a_metrics_port_beyond_loopback_without_a_token_is_refused() -> None:
    code, _, err = await run_toolmesh(
        "run", "text-completion", "--metrics-port", "0", "--metrics-host", "0.0.0.0",
        timeout=30, extra_env={"TOOLMESH_METRICS_TOKEN": ""})
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "toolmesh: error: --metrics-host 0.0.0.0: serving metrics beyond loopback needs a "
        "token (set TOOLMESH_METRICS_TOKEN or --metrics-token-file; the scraper sends it as "
        "a bearer token)")


async def test_an_empty_metrics_token_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")
    code, _, err = await run_toolmesh(
        "run", "text-completion", "--metrics-port", "0", "--metrics-token-file", str(empty),
        timeout=30)
    assert code == 1 and err.strip().endswith(f"--metrics-token-file {str(empty)!r} is empty")


@pytest.mark.parametrize(("environ", "name"), [
    ({}, "toolmesh-text-completion"),
    ({"OTEL_SERVICE_NAME": "llm-eu"}, "llm-eu"),
    ({"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod, service.name=llm-us"},
     "llm-us"),
])
async def test_a_part_names_its_spans_as_the_environment_says(environ: dict[str, str],
                                                              name: str) -> None:
    proc, lines = await start_toolmesh(
        "run", "text-completion", ready="tracing on:",
        extra_env={"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "",
                   "OTEL_RESOURCE_ATTRIBUTES": "", **environ})
    proc.terminate()
    await proc.wait()
    assert f"tracing on: spans of {name} go to stdout" in lines[-1]


@pytest.mark.parametrize("sent", [
    {"traceparent": 5},
    {"traceparent": ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"]},
    {"traceparent": "00-" + "f" * 5000},
    {"traceparent": "not a traceparent", "tracestate": {"a": 1}},
])
def test_a_peers_bad_trace_context_starts_a_new_trace(sent: dict[str, object],
                                                      spans: object) -> None:
    with tracing.span("handle", parent=sent) as span:  # type: ignore[arg-type]
        assert span is not None and span.parent is None


def test_a_peers_trace_context_is_continued(spans: object) -> None:
    sent = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    with tracing.span("handle", parent=sent) as span:
        assert span is not None
        assert tracing.trace_id() == "0af7651916cd43dd8448eb211c80319c"
        assert f"{span.parent.span_id:016x}" == "b7ad6b7169203331"
