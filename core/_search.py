"""Tool search: a BM25 ranking of tool definitions by what a query asks for."""

from __future__ import annotations

import heapq
import math
import operator
import re
import weakref
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ._tool import ToolDefinition

__all__ = ("SearchIndex", "words")

# Runs of letters or digits; a run with camelCase humps also reads as its
# parts: "getFileInfo", "get_file_info" and "get-file-info" all hold get,
# file, info, and "GitHub" holds github as well as git and hub.
_RUN = re.compile(r"[A-Za-z]+|[0-9]+")
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
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
        "called",
        "named",
        "please",
        "want",
        "need",
        "let",
        "someone",
        "something",
        "else",
    ]
)
# BM25's usual constants: term frequency saturation and length normalization.
_K1 = 1.2
_B = 0.75
# How much each part of a definition counts: a word of the name says most
# about the tool, a parameter's name more than a word of prose.
_NAME_WEIGHT = 3
_PARAMETER_WEIGHT = 2
_SUMMARY_WEIGHT = 3
_SENTENCE = re.compile(r"(?<=[.!?])\s|\n\s*\n")
# Parameters are read this deep into nested object schemas.
_DEPTH = 3

# Words that name one thing in different ways across tool vocabularies. A
# query word also matches its kin, at a lower weight than the word itself, so
# "folder" finds directory tools and "PR" finds pull requests.
_KIN = (
    "folder directory dir",
    "repo repository",
    "pr pull_request",
    "mr merge_request",
    "ticket issue bug",
    "delete remove erase",
    "create make new",
    "find search locate lookup look",
    "run execute launch exec",
    "shell terminal command bash console",
    "picture image photo",
    "webpage page website site",
    "download fetch retrieve",
    "coordinates geocode latitude longitude",
    "route directions",
    "altitude elevation height high",
    "tab page",
    "rename move",
    "modify change edit update",
    "send post",
    "reply respond",
    "history log past previous",
    "kill terminate",
    "configuration config setting settings",
    "regex regular_expression pattern",
    "account user profile",
    "comment reply",
    "approve review",
    "video screencast recording",
    "modified changed status",
    "stage add",
    "unstage reset",
    "content contents inside",
    "disk filesystem file_system",
    "load read",
    "several multiple many batch",
    "tree hierarchy outline nested",
    "relation link edge connection",
    "copy fork clone duplicate",
    "latest newest recent",
    "wait pause",
    "http network",
    "resize dimension size",
    "show list display view",
    "javascript js script",
    "switch select",
    "save record commit",
)
# How much a kin word counts against the word itself.
_KIN_WEIGHT = 0.7

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
    for run in _RUN.findall(text):
        if len(run) > 2 and run[-1] == "s" and run[:-1].isupper():
            run = run[:-1]  # an acronym's plural: "PRs", "URLs"
        parts = () if run.islower() or run.isupper() else _HUMP.findall(run)
        for word in (run, *parts) if len(parts) > 1 else (run,):
            word = word.lower()
            if word not in _STOP:
                found.append(_stem(word))
    return found


def _kin() -> dict[str, tuple[tuple[str, ...], ...]]:
    """Each stemmed word's kin, each kin a tuple of stemmed words (a phrase)."""
    kin: dict[str, list[tuple[str, ...]]] = {}
    for line in _KIN:
        group = [tuple(words(term.replace("_", " "))) for term in line.split()]
        for member in group:
            if len(member) == 1:
                kin.setdefault(member[0], []).extend(other for other in group if other != member)
    return {word: tuple(dict.fromkeys(others)) for word, others in kin.items()}


_kinship: dict[str, tuple[tuple[str, ...], ...]] | None = None


def query_terms(query: str) -> dict[str, float]:
    """The stemmed words a query is scored by, each with its weight: the
    query's own words count 1, their kin (see ``_KIN``) less.
    """
    global _kinship
    if _kinship is None:
        _kinship = _kin()
    terms = dict.fromkeys(words(query), 1.0)
    for word in list(terms):
        for phrase in _kinship.get(word, ()):
            for term in phrase:
                terms.setdefault(term, _KIN_WEIGHT / len(phrase))
    return terms


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


# Definitions are immutable and shared by the snapshots that keep their tool, so
# after a change the next index reads again only the changed ones. Keyed by
# identity (a definition's schemas are not hashable), each entry leaving with
# its definition.
_BAGS: dict[int, tuple[weakref.ref[ToolDefinition], Counter[str]]] = {}


def _bag(definition: ToolDefinition) -> Counter[str]:
    key = id(definition)
    known = _BAGS.get(key)
    if known is not None and known[0]() is definition:
        return known[1]
    bag = _document(definition)
    _BAGS[key] = (weakref.ref(definition, lambda _, key=key: _BAGS.pop(key, None)), bag)  # type: ignore[misc]
    return bag


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
    # The first sentence usually says what the tool does; the rest, how.
    summary = _SENTENCE.split(definition.description.strip(), 1)[0]
    for word in words(summary):
        bag[word] += _SUMMARY_WEIGHT - 1
    return bag


class SearchIndex:
    """A BM25 index over a fixed tuple of definitions.

    Every term's contribution to every document's score is computed when the
    index is built, so a query only adds up the postings of its own words.
    Ties are broken by position, so the ranking is deterministic.
    """

    __slots__ = ("_definitions", "_names", "_postings")

    def __init__(self, definitions: Iterable[ToolDefinition]) -> None:
        self._definitions = tuple(definitions)
        self._names: dict[str, int] | None = None
        bags = [_bag(definition) for definition in self._definitions]
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
        self,
        query: str,
        limit: int,
        *,
        only: Collection[str] | None = None,
        exclude: Collection[str] = (),
    ) -> tuple[ToolDefinition, ...]:
        """The ``limit`` best matches for ``query``, best first: among the names in
        ``only`` when given, else among all but the names in ``exclude``. A
        definition sharing no word (nor kin of one) with the query never matches.
        """
        scores: dict[int, float] = {}
        get = scores.get
        for term, weight in query_terms(query).items():
            postings = self._postings.get(term, ())
            if weight == 1.0:
                for index, impact in postings:
                    scores[index] = get(index, 0.0) + impact
            else:
                for index, impact in postings:
                    scores[index] = get(index, 0.0) + weight * impact
        positions = self._positions()
        if only is not None:
            found = [
                (index, scores[index])
                for index in (positions.get(name) for name in only)
                if index is not None and index in scores
            ]
        else:
            # The best few by score alone (in C), then the exclusions dropped:
            # the cost stays in proportion to the matches, not the calls.
            skipped = {positions[name] for name in exclude if name in positions}
            best = heapq.nlargest(limit + len(skipped), scores.items(), key=_score)
            found = [item for item in best if item[0] not in skipped]
        found.sort(key=_rank)
        return tuple(self._definitions[index] for index, _ in found[:limit])

    def _positions(self) -> dict[str, int]:
        if self._names is None:
            self._names = {d.name: index for index, d in enumerate(self._definitions)}
        return self._names


_score = operator.itemgetter(1)


def _rank(item: tuple[int, float]) -> tuple[float, int]:
    return (-item[1], item[0])
