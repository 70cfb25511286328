"""Which paths the rules deny for an action: folders a search or a sandbox covers whole."""

from __future__ import annotations

import pegboard

__all__ = ("may_deny", "pruned_folders")


def _rules(permissions: pegboard.Permissions) -> tuple[pegboard.PermissionRule, ...] | None:
    rules = getattr(permissions, "rules", None)
    return None if rules is None else tuple(rules)


def _for(rule: pegboard.PermissionRule, action: str) -> bool:
    # A pattern matches itself literally ('*' matches '*'), so this asks only
    # whether the rule's action pattern covers ``action``.
    return rule.matches(action, rule.resource)


def may_deny(permissions: pegboard.Permissions, action: str = "read") -> bool:
    """Whether any rule may deny ``action`` (true when the rules cannot be inspected)."""
    rules = _rules(permissions)
    if rules is None:
        return True
    return any(rule.effect == "deny" and _for(rule, action) for rule in rules)


def pruned_folders(permissions: pegboard.Permissions, action: str = "read") -> list[str]:
    """Folders every path below which the rules deny for ``action`` (``read`` by default).

    A rule ``deny read secrets/*`` (or ``secrets/**``) yields ``secrets``
    unless a later rule that does not deny could match a path below it (the
    last matching rule wins). Other patterns prune nothing: their files are
    dropped one by one.
    """
    rules = _rules(permissions)
    if rules is None:
        return []
    folders = []
    for index, rule in enumerate(rules):
        if rule.effect != "deny" or not _for(rule, action):
            continue
        folder = rule.resource.rstrip("*")
        if not folder.endswith("/") or folder == rule.resource:
            continue
        folder = folder.rstrip("/")
        if not folder or any(char in folder for char in "*?"):
            continue
        later = rules[index + 1 :]
        if any(
            other.effect != "deny"
            and _for(other, action)
            and _may_match_below(other.resource, folder)
            for other in later
        ):
            continue
        folders.append(folder)
    return sorted(set(folders))


def _may_match_below(pattern: str, folder: str) -> bool:
    """Whether ``pattern`` (``*`` any run, ``?`` one character) matches some path in ``folder``."""
    alternatives = [pattern]
    if pattern.endswith(" *"):  # "x *" also matches the bare "x"
        alternatives.append(pattern[:-2])
    return any(_prefix_alive(one, f"{folder}/") for one in alternatives)


def _prefix_alive(pattern: str, prefix: str) -> bool:
    # Simulates the pattern as an automaton over ``prefix``: if any state
    # survives, some continuation of ``prefix`` matches.
    states = _closure(pattern, {0})
    for char in prefix:
        moved = set()
        for state in states:
            if state < len(pattern):
                token = pattern[state]
                if token == "*":
                    moved.add(state)
                elif token in ("?", char):
                    moved.add(state + 1)
        states = _closure(pattern, moved)
        if not states:
            return False
    return True


def _closure(pattern: str, states: set[int]) -> set[int]:
    result = set(states)
    for state in sorted(states):
        position = state
        while position < len(pattern) and pattern[position] == "*":
            position += 1
            result.add(position)
    return result
