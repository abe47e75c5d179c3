import pytest

from toolmesh import QueueIdError, parse_queue_id
from toolmesh.bus.queue_id import QueueId


@pytest.mark.parametrize(("pulsar", "trustgraph"), [
    ("non-persistent://tg/request/joke", "request:tg:joke"),
    ("persistent://tg/flow/x", "flow:tg:x"),
    ("non-persistent://tg/response/joke", "response:tg:joke"),
    ("non-persistent://tg/notify/config", "notify:tg:config"),
])
def test_both_spellings_name_the_same_queue(pulsar: str, trustgraph: str) -> None:
    assert parse_queue_id(pulsar) == parse_queue_id(trustgraph)
    assert str(parse_queue_id(pulsar)) == trustgraph
    assert parse_queue_id(trustgraph).pulsar == pulsar


def test_inner_colons_are_kept() -> None:
    q = parse_queue_id("request:tg:agent:default:default")
    assert q == QueueId("request", "tg", "agent:default:default")
    assert str(q) == "request:tg:agent:default:default"


def test_slashes_in_pulsar_topic_are_kept() -> None:
    assert parse_queue_id("non-persistent://tg/request/a/b").topic == "a/b"


def test_classes_decide_sharing_and_persistence() -> None:
    assert parse_queue_id("request:tg:x").shared
    assert parse_queue_id("flow:tg:x").shared and parse_queue_id("flow:tg:x").persistent
    assert not parse_queue_id("response:tg:x").shared
    assert not parse_queue_id("notify:tg:x").shared
    assert not parse_queue_id("request:tg:x").persistent


@pytest.mark.parametrize("bad", [
    "joke", "request:tg", "bogus:tg:x", "http://tg/request/x", "non-persistent://tg/request",
    "non-persistent://tg/bogus/x", "request::x", "request:tg:", "",
])
def test_anything_else_is_rejected_naming_the_id_and_the_forms(bad: str) -> None:
    with pytest.raises(QueueIdError) as e:
        parse_queue_id(bad)
    assert repr(bad) in str(e.value)
    assert "request:tg:joke" in str(e.value) and "non-persistent://" in str(e.value)


def test_non_string_is_rejected() -> None:
    with pytest.raises(QueueIdError):
        parse_queue_id(42)  # type: ignore[arg-type]
