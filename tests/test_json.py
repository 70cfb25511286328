"""Strict JSON at the boundaries."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pegboard import CodecError, FrozenDict, FrozenList, thaw
from pegboard._json import find_problem, format_path, freeze, loads


@pytest.mark.parametrize(
    ("value", "path", "rule"),
    [
        ({"a": [1, float("nan")]}, "$.a[1]", "number"),
        ({"a": {"b c": float("-inf")}}, '$.a["b c"]', "number"),
        ({1: "x"}, "$", "object"),
        ({"a": "\ud800"}, "$.a", "unicode"),
        ({"\ud800": 1}, "$", "unicode"),
        ({"a": {1, 2}}, "$.a", "type"),
        ({"a": b"bytes"}, "$.a", "type"),
    ],
)
def test_find_problem_names_the_path(value: Any, path: str, rule: str) -> None:
    """Values that are not plain JSON are reported with where and why."""
    problem = find_problem(value, max_depth=64)
    assert problem is not None
    assert (path, rule) == (problem.path, problem.rule)


def test_find_problem_accepts_plain_json() -> None:
    """Plain JSON, tuples included, passes."""
    assert find_problem({"a": [1, 2.5, True, None, "é", ("t",)]}, max_depth=64) is None


def test_depth_limit_is_exact() -> None:
    """Nesting up to the limit passes; one more level is refused."""
    assert find_problem([[[1]]], max_depth=3) is None
    problem = find_problem([[[[1]]]], max_depth=3)
    assert problem is not None
    assert "deeper than 3" in str(problem)


def test_loads_rejects_what_json_forbids() -> None:
    """NaN, Infinity, overflowing numbers and lone surrogates are not JSON."""
    for text in ('{"a": NaN}', '{"a": -Infinity}', '{"a": 1e400}', '{"a": "\\udc00"}'):
        with pytest.raises(CodecError) as caught:
            loads(text, max_depth=64)
        assert caught.value.path == "$.a"


def test_loads_reports_the_position_of_broken_text() -> None:
    """Broken JSON text names the line and column."""
    with pytest.raises(CodecError, match="line 2 column"):
        loads('{"a":\n ]', max_depth=64)


def test_loads_accepts_surrogate_pairs() -> None:
    """An escaped surrogate pair is one valid character."""
    assert loads('{"a": "\\ud83d\\ude00"}', max_depth=64) == {"a": "😀"}


def test_format_path_quotes_odd_keys() -> None:
    """Identifiers read as .name, anything else as a quoted key."""
    assert format_path((((None, "a"), 0), "x y")) == '$.a[0]["x y"]'


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(_json)
def test_freeze_then_thaw_round_trips(value: Any) -> None:
    """A frozen value equals its source, and thawing gives back plain containers."""
    frozen = freeze(value)
    assert value == frozen
    assert value == thaw(frozen)
    assert value == copy.deepcopy(frozen)
    assert value == pickle.loads(pickle.dumps(frozen))


def test_frozen_containers_refuse_every_mutation() -> None:
    """No mutating method of dict or list works on the frozen forms."""
    frozen = freeze({"a": [1]})
    assert isinstance(frozen, FrozenDict)
    assert isinstance(frozen["a"], FrozenList)
    for mutate in (
        lambda: frozen.__setitem__("b", 1),
        lambda: frozen.update(b=1),
        lambda: frozen.pop("a"),
        lambda: frozen.setdefault("b", 1),
        lambda: frozen.clear(),
        lambda: frozen["a"].append(2),
        lambda: frozen["a"].extend([2]),
        lambda: frozen["a"].__setitem__(0, 2),
        lambda: frozen["a"].sort(),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    assert frozen == {"a": [1]}


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 12345678901234567890123}',
        b'{"n": -92233720368547758090}',
        '[18446744073709551616, "12345678901234567890123", 1.5]',
    ],
)
def test_loads_keeps_integers_of_any_size_exact(text: str | bytes) -> None:
    """Integers orjson would read as floats come back exact; the rest is unchanged."""
    import json

    expected = json.loads(text)
    value = loads(text, max_depth=64)
    assert expected == value
    assert [type(item) for item in _leaves(expected)] == [type(item) for item in _leaves(value)]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize(
    ("text", "path", "rule"),
    [
        ('{"a": [' + "9" * 5000 + "]}", "$.a[0]", "number"),
        ('{"a": 12345678901234567890123, "b": NaN}', "$.b", "number"),
        ('{"a": 12345678901234567890123, "b": "\\ud800"}', "$.b", "unicode"),
        ('{"a": 12345678901234567890123, "b": 1e999}', "$.b", "number"),
        ('{"a": 12345678901234567890123,', "$", "json"),
        ("[" * 100 + "12345678901234567890123" + "]" * 100, "$" + "[0]" * 64, "depth"),
    ],
)
def test_loads_names_the_field_of_a_bad_value(text: str, path: str, rule: str) -> None:
    """A value problem names its path, also on the exact parser's path."""
    with pytest.raises(CodecError) as caught:
        loads(text, max_depth=64)
    assert (path, rule) == (caught.value.path, caught.value.rule)


def test_dumps_writes_integers_beyond_64_bits() -> None:
    """orjson refuses them; dumps and dumped_size fall back to an exact writer."""
    from pegboard._json import dumped_size, dumps

    text = dumps({"n": 2**80, "s": "é"})
    assert f'{{"n":{2**80},"s":"é"}}' == text
    assert len(text.encode()) == dumped_size({"n": 2**80, "s": "é"})


def test_copy_within_copies_and_stops_at_the_budget() -> None:
    """The copy shares no container with its source; an oversized value stops the walk."""
    from pegboard._json import TooLarge, copy_within

    source = {"a": [1, {"b": ("c", 2**80)}]}
    copied = copy_within(source, max_depth=64, max_bytes=1000)
    assert {"a": [1, {"b": ["c", 2**80]}]} == copied
    assert copied["a"] is not source["a"]
    assert copied["a"][1] is not source["a"][1]
    with pytest.raises(TooLarge) as caught:
        copy_within({"big": "x" * 2000, "small": "y"}, max_depth=64, max_bytes=1000)
    assert ("$.big", 2000) == (caught.value.longest_path, caught.value.longest)
    with pytest.raises(CodecError, match="deeper than 2"):
        copy_within([[[1]]], max_depth=2, max_bytes=1000)
    with pytest.raises(CodecError) as bad:
        copy_within({"a": [float("inf")]}, max_depth=64, max_bytes=1000)
    assert ("$.a[0]", "number") == (bad.value.path, bad.value.rule)


def test_frozen_containers_freeze_what_they_are_built_from() -> None:
    """FrozenDict and FrozenList built directly are frozen all the way down, like freeze()."""
    frozen = FrozenDict({"a": [1, {"b": [2]}]})
    listed = FrozenList([{"c": [3]}])
    with pytest.raises(TypeError, match="read-only"):
        frozen["a"][1]["b"].append(3)
    with pytest.raises(TypeError, match="read-only"):
        listed[0]["c"].append(4)
    assert freeze(frozen) is frozen
