"""Tool search: a BM25 ranking of tool definitions by what a query asks for."""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._tool import ToolDefinition

__all__ = ("SearchIndex", "words")

# Runs of letters and digits, split at camelCase humps: "getFileInfo" and
# "get_file_info" and "get-file-info" all read as get, file, info.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Words that say nothing about what a tool does.
_STOP = frozenset(
    [
        "a",
        "about",
        "after",
        "all",
        "also",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "before",
        "being",
        "both",
        "but",
        "by",
        "can",
        "could",
        "do",
        "does",
        "each",
        "either",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "may",
        "me",
        "more",
        "most",
        "must",
        "my",
        "no",
        "not",
        "of",
        "on",
        "one",
        "only",
        "or",
        "other",
        "our",
        "out",
        "over",
        "same",
        "should",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "up",
        "use",
        "used",
        "uses",
        "using",
        "via",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
# BM25's usual constants: term frequency saturation and length normalization.
_K1 = 1.2
_B = 0.75
# How much each part of a definition counts: a word of the name says most
# about the tool, a parameter's name more than a word of prose.
_NAME_WEIGHT = 3
_PARAMETER_WEIGHT = 2
# Parameters are read this deep into nested object schemas.
_DEPTH = 3

_stemmer: Any = None
_stems: dict[str, str] = {}


def _stem(word: str) -> str:
    stem = _stems.get(word)
    if stem is None:
        global _stemmer
        if _stemmer is None:
            # Imported when the first index is built: `import pegboard` stays cheap.
            import snowballstemmer  # type: ignore[import-untyped]

            _stemmer = snowballstemmer.stemmer("english")
        stem = _stems[word] = _stemmer.stemWord(word)
    return stem


def words(text: str) -> list[str]:
    """The stemmed, lowercased words of ``text`` that can tell tools apart."""
    found = []
    for word in _WORD.findall(text):
        word = word.lower()
        if word not in _STOP:
            found.append(_stem(word))
    return found


def _parameters(schema: Any, into: list[str], prose: list[str], depth: int = 0) -> None:
    """Collect the property names and descriptions of a JSON Schema, nested ones too."""
    if not isinstance(schema, Mapping) or depth > _DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, value in properties.items():
            into.append(str(name))
            if isinstance(value, Mapping):
                described = value.get("description")
                if isinstance(described, str):
                    prose.append(described)
                _parameters(value, into, prose, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _parameters(items, into, prose, depth + 1)
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if isinstance(options, Sequence) and not isinstance(options, str):
            for option in options:
                _parameters(option, into, prose, depth + 1)


def _document(definition: ToolDefinition) -> Counter[str]:
    """The weighted bag of words one definition is ranked by."""
    names: list[str] = []
    prose = [definition.description]
    if definition.title:
        prose.append(definition.title)
    _parameters(definition.input_schema, names, prose)
    bag: Counter[str] = Counter()
    for word in words(definition.name):
        bag[word] += _NAME_WEIGHT
    for word in words(" ".join(names)):
        bag[word] += _PARAMETER_WEIGHT
    bag.update(words("\n".join(prose)))
    return bag


class SearchIndex:
    """A BM25 index over a fixed tuple of definitions.

    Every term's contribution to every document's score is computed when the
    index is built, so a query only adds up the postings of its own words.
    Ties are broken by position, so the ranking is deterministic.
    """

    __slots__ = ("_definitions", "_postings")

    def __init__(self, definitions: Iterable[ToolDefinition]) -> None:
        self._definitions = tuple(definitions)
        bags = [_document(definition) for definition in self._definitions]
        count = len(bags)
        lengths = [sum(bag.values()) for bag in bags]
        average = (sum(lengths) / count) if count else 1.0
        frequencies: Counter[str] = Counter()
        for bag in bags:
            frequencies.update(bag.keys())
        postings: dict[str, list[tuple[int, float]]] = {}
        for index, bag in enumerate(bags):
            norm = _K1 * (1 - _B + _B * lengths[index] / average)
            for term, frequency in bag.items():
                weight = frequency * (_K1 + 1) / (frequency + norm)
                postings.setdefault(term, []).append((index, weight))
        self._postings: dict[str, tuple[tuple[int, float], ...]] = {}
        for term, found in postings.items():
            # The non-negative IDF of Lucene's BM25.
            idf = math.log(1 + (count - len(found) + 0.5) / (len(found) + 0.5))
            self._postings[term] = tuple((index, idf * weight) for index, weight in found)

    def __len__(self) -> int:
        return len(self._definitions)

    def search(
        self, query: str, limit: int, keep: Callable[[str], bool] | None = None
    ) -> tuple[ToolDefinition, ...]:
        """The ``limit`` best matches for ``query`` among the definitions whose
        name ``keep`` accepts, best first; a definition sharing no word with
        the query never matches.
        """
        scores: dict[int, float] = {}
        for term in set(words(query)):
            for index, impact in self._postings.get(term, ()):
                scores[index] = scores.get(index, 0.0) + impact
        found: Iterable[tuple[int, float]] = scores.items()
        if keep is not None:
            definitions = self._definitions
            found = [item for item in found if keep(definitions[item[0]].name)]
        best = heapq.nsmallest(limit, found, key=_rank)
        return tuple(self._definitions[index] for index, _ in best)


def _rank(item: tuple[int, float]) -> tuple[float, int]:
    return (-item[1], item[0])
