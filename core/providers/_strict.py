"""Strict schema profiles: a tool's JSON Schema in a provider's strict subset, and back."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final, NoReturn

import attrs

import pegboard

from .._converter import json_type
from ._errors import CompatibilityError

__all__ = ("ANTHROPIC", "OPENAI", "Profile", "convert", "parameters", "strict_input")

# Keywords whose meaning a strict grammar cannot carry: dropping them would let
# the model send values of a different shape, so they are refused.
_REFUSED: Final = frozenset(
    {
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "patternProperties",
        "propertyNames",
        "prefixItems",
        "unevaluatedItems",
        "additionalItems",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "$anchor",
    }
)
# Keywords the conversion itself handles.
_STRUCTURE: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "anyOf",
        "oneOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "default",
        "format",
    }
)
_ABSENT: Final = object()
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


@attrs.frozen
class Profile:
    """What one provider's strict mode accepts.

    ``kept`` are the validation keywords it enforces (others that only narrow
    values are dropped: the pipeline still checks the tool's own schema);
    ``all_required`` means every property must be listed as required.
    """

    provider: str
    all_required: bool
    kept: frozenset[str]
    formats: frozenset[str]
    keeps_default: bool
    recursion: bool
    ref_siblings: bool
    max_min_items: int | None = None


#: OpenAI Structured Outputs (Chat Completions and Responses function tools).
OPENAI: Final = Profile(
    provider="OpenAI strict mode",
    all_required=True,
    kept=frozenset(
        {
            "pattern",
            "multipleOf",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "minItems",
            "maxItems",
        }
    ),
    formats=frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
    ),
    keeps_default=False,
    recursion=True,
    ref_siblings=False,
)

#: Anthropic strict tool use.
ANTHROPIC: Final = Profile(
    provider="Anthropic strict tool use",
    all_required=False,
    kept=frozenset({"pattern", "minItems"}),
    formats=frozenset(
        {
            "date-time",
            "time",
            "date",
            "duration",
            "email",
            "hostname",
            "uri",
            "ipv4",
            "ipv6",
            "uuid",
        }
    ),
    keeps_default=True,
    recursion=False,
    ref_siblings=True,
    max_min_items=1,
)


def _child(path: str, *keys: str | int) -> str:
    for key in keys:
        if isinstance(key, int):
            path += f"[{key}]"
        elif _IDENTIFIER.match(key):
            path += f".{key}"
        else:
            path += f"[{json.dumps(key)}]"
    return path


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    seen = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and seen < 64:
        target = _local(schema["$ref"], root)
        if target is None:
            return schema
        schema, seen = target, seen + 1
    return schema


def _local(ref: str, root: Mapping[str, Any]) -> Any:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            defs = root.get(prefix[2:-1])
            name = ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
            if isinstance(defs, Mapping) and name in defs:
                return defs[name]
    return None


def _types(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list | tuple):
        return [str(kind) for kind in declared]
    values = schema["enum"] if "enum" in schema else [schema.get("const", _ABSENT)]
    return sorted({json_type(value) for value in values if value is not _ABSENT})


def _branches(schema: Mapping[str, Any]) -> list[Any]:
    return [*schema.get("anyOf", ()), *schema.get("oneOf", ())]


def admits(schema: Any, kind: str, root: Mapping[str, Any], depth: int = 0) -> bool:
    """Whether ``schema`` accepts some value of JSON type ``kind``."""
    schema = _resolve(schema, root)
    if schema is True or schema == {}:
        return True
    if not isinstance(schema, Mapping) or depth > 32:
        return False
    branches = _branches(schema)
    if branches:
        return any(admits(branch, kind, root, depth + 1) for branch in branches)
    types = _types(schema)
    if not types and "type" not in schema:
        return True
    return kind in types or (kind == "integer" and "number" in types)


def _select(schema: Any, kind: str, root: Mapping[str, Any]) -> Any:
    """The one branch of ``schema`` taking values of JSON type ``kind``, else ``None``."""
    schema = _resolve(schema, root)
    while isinstance(schema, Mapping) and _branches(schema):
        matching = [b for b in _branches(schema) if admits(b, kind, root)]
        if len(matching) != 1:
            return None
        schema = _resolve(matching[0], root)
    return schema if isinstance(schema, Mapping) else None


def _optional_properties(schema: Any, root: Mapping[str, Any]) -> Iterator[str]:
    """Optional properties anywhere under ``schema`` that do not accept null."""
    stack, seen = [schema], set()
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            if node["$ref"] in seen:
                continue
            seen.add(node["$ref"])
            node = _resolve(node, root)
        if not isinstance(node, Mapping):
            continue
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            required = node.get("required", ())
            for name, child in properties.items():
                if name not in required and not admits(child, "null", root):
                    yield name
                stack.append(child)
        stack.extend(_branches(node))
        if "items" in node:
            stack.append(node["items"])


@attrs.define
class _Converter:
    profile: Profile
    tool: str
    root: Mapping[str, Any]

    def fail(self, path: str, rule: str, message: str) -> NoReturn:
        raise CompatibilityError(
            message, provider=self.profile.provider, tool=self.tool, path=path, rule=rule
        )

    def convert(self) -> dict[str, Any]:
        root = self.root
        if not isinstance(root, Mapping) or "object" not in _types(root) or _branches(root):
            self.fail("$", "root-object", "the input schema must be one object type at its root")
        converted = self.node(root, "$")
        for key in ("$defs", "definitions"):
            defs = root.get(key)
            if isinstance(defs, Mapping):
                converted[key] = {
                    name: self.node(schema, _child("$", key, name)) for name, schema in defs.items()
                }
        if not self.profile.recursion:
            self.refuse_recursion()
        return converted

    def node(self, schema: Any, path: str) -> dict[str, Any]:
        if not isinstance(schema, Mapping):
            self.fail(path, "type", "a boolean schema cannot be expressed; give an object schema")
        for key in schema:
            if key in _REFUSED:
                self.fail(
                    _child(path, key),
                    key,
                    f"{self.profile.provider} has no {key!r}; rewrite the schema without it "
                    "or send the tool with strict=False",
                )
        out: dict[str, Any] = {}
        for key in ("title", "description"):
            if isinstance(schema.get(key), str):
                out[key] = schema[key]
        if self.profile.keeps_default and "default" in schema:
            out["default"] = pegboard.thaw(schema["default"])
        if "$ref" in schema:
            return self.reference(schema, path, out)
        if _branches(schema):
            return self.union(schema, path, out)
        if "type" not in schema and "enum" not in schema and "const" not in schema:
            self.fail(
                path,
                "type",
                "a schema without a type accepts any value, which strict mode cannot express; "
                "give it a type",
            )
        types = _types(schema)
        out["type"] = types[0] if len(types) == 1 else types
        for key in ("enum", "const"):
            if key in schema:
                out[key] = pegboard.thaw(schema[key])
        if schema.get("format") in self.profile.formats:
            out["format"] = schema["format"]
        for key, value in schema.items():
            if key in self.profile.kept and key not in _STRUCTURE:
                limit = self.profile.max_min_items
                if key == "minItems" and limit is not None and value > limit:
                    continue
                out[key] = pegboard.thaw(value)
        if "object" in types:
            self.object(schema, path, out)
        if "array" in types:
            if "items" not in schema:
                self.fail(
                    path, "items", "an array without 'items' accepts any items; give them a schema"
                )
            out["items"] = self.node(schema["items"], _child(path, "items"))
        return out

    def reference(
        self, schema: Mapping[str, Any], path: str, out: dict[str, Any]
    ) -> dict[str, Any]:
        ref = schema["$ref"]
        if not isinstance(ref, str) or _local(ref, self.root) is None:
            self.fail(_child(path, "$ref"), "$ref", f"{ref!r} is not a definition in this schema")
        others = set(schema) - {"$ref", "title", "description", "default", "$comment"}
        if others:
            self.fail(
                path,
                "$ref",
                f"keywords beside $ref ({', '.join(sorted(others))}) are not supported",
            )
        if out and not self.profile.ref_siblings:
            # OpenAI takes no keywords beside $ref; a one-branch anyOf keeps the
            # description without changing what is accepted.
            return {"anyOf": [{"$ref": ref}], **out}
        out["$ref"] = ref
        return out

    def union(self, schema: Mapping[str, Any], path: str, out: dict[str, Any]) -> dict[str, Any]:
        if "anyOf" in schema and "oneOf" in schema:
            self.fail(path, "oneOf", "anyOf and oneOf together cannot be expressed")
        keyword = "anyOf" if "anyOf" in schema else "oneOf"
        others = set(schema) & (_STRUCTURE - {"anyOf", "oneOf", "title", "description", "default"})
        if others:
            self.fail(
                path, keyword, f"{keyword} beside {', '.join(sorted(others))} is not supported"
            )
        branches = schema[keyword]
        # oneOf becomes anyOf: it only widens, and the pipeline still checks oneOf.
        out["anyOf"] = [self.node(b, _child(path, keyword, i)) for i, b in enumerate(branches)]
        if self.profile.all_required:
            for kind in ("object", "array"):
                taking = [b for b in branches if admits(b, kind, self.root)]
                if len(taking) > 1 and any(
                    next(_optional_properties(b, self.root), None) for b in taking
                ):
                    self.fail(
                        _child(path, keyword),
                        "anyOf",
                        f"several branches take an {kind} with optional properties, so a null "
                        "from the model could not be traced back to the property left out",
                    )
        return out

    def object(self, schema: Mapping[str, Any], path: str, out: dict[str, Any]) -> None:
        properties = schema.get("properties", {})
        required = list(schema.get("required", ()))
        for key in ("additionalProperties", "unevaluatedProperties"):
            if schema.get(key, False) is not False:
                self.fail(
                    _child(path, key),
                    "additionalProperties",
                    "an object with free-form keys cannot be expressed; describe its properties",
                )
        if not properties and "additionalProperties" not in schema:
            self.fail(
                path,
                "additionalProperties",
                "an object without properties takes any keys, which strict mode cannot express; "
                "describe its properties or set additionalProperties to false",
            )
        unknown = [name for name in required if name not in properties]
        if unknown:
            self.fail(_child(path, "required"), "required", f"{unknown[0]!r} is not a property")
        converted: dict[str, Any] = {}
        for name, child in properties.items():
            where = _child(path, "properties", name)
            value = self.node(child, where)
            if self.profile.all_required and name not in required:
                if not admits(child, "null", self.root):
                    value = _nullable(value, child)
                elif not (isinstance(child, Mapping) and child.get("default", 0) is None):
                    self.fail(
                        where,
                        "optional-null",
                        "an optional property that accepts null is ambiguous in strict mode, "
                        "where the model sends null for what it leaves out; give it "
                        "'default': null or make it required",
                    )
            converted[name] = value
        out["properties"] = converted
        out["required"] = list(properties) if self.profile.all_required else required
        out["additionalProperties"] = False

    def refuse_recursion(self) -> None:
        for key in ("$defs", "definitions"):
            defs = self.root.get(key)
            if not isinstance(defs, Mapping):
                continue
            for name in defs:
                ref = f"#/{key}/{name}"
                if ref in _references(defs[name], self.root):
                    self.fail(
                        _child("$", key, name),
                        "recursion",
                        "a recursive schema cannot be expressed; unroll it to a fixed depth",
                    )


def _references(schema: Any, root: Mapping[str, Any]) -> set[str]:
    """Every local ``$ref`` reachable from ``schema``."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref not in found:
                found.add(ref)
                stack.append(_local(ref, root))
            stack.extend(value for key, value in node.items() if key not in ("$defs", "const"))
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return found


def _nullable(converted: dict[str, Any], original: Any) -> dict[str, Any]:
    note = "Optional: send null to leave it out."
    if isinstance(original, Mapping) and "default" in original:
        note = f"Optional: send null for the default, {json.dumps(original['default'])}."
    description = converted.get("description")
    described = {"description": f"{description.rstrip('. ')}. {note}" if description else note}
    if "$ref" in converted or "const" in converted:
        inner = {k: v for k, v in converted.items() if k not in ("description", "title", "default")}
        return {"anyOf": [inner, {"type": "null"}], **described}
    result = {**converted, **described}
    if "anyOf" in converted:
        result["anyOf"] = [*converted["anyOf"], {"type": "null"}]
        return result
    types = converted["type"]
    result["type"] = [*(types if isinstance(types, list) else [types]), "null"]
    if "enum" in converted:
        result["enum"] = [*converted["enum"], None]
    return result


def convert(profile: Profile, tool: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` in ``profile``'s strict subset, or `CompatibilityError` naming what not."""
    return _Converter(profile, tool, schema).convert()


def strict_input(
    request: pegboard.Request, name: str, arguments: str | bytes | Mapping[str, Any]
) -> str | bytes | Mapping[str, Any]:
    """The tool input that OpenAI strict-mode ``arguments`` stand for.

    Strict mode makes every property required, so the model sends ``null`` for
    an optional property it leaves out. This removes exactly those nulls (where
    the tool's own schema does not accept null), so the input decodes as if the
    property had been omitted. JSON text comes back as JSON text, so the
    pipeline still bounds and parses it; when nothing is removed, and for
    anything it cannot read (unknown tool, not JSON, not an object), the
    arguments come back as they are, for the pipeline to judge.
    """
    definition = next((d for d in request.definitions if d.name == name), None)
    if definition is None:
        return arguments
    value: Any = arguments
    if isinstance(arguments, str | bytes):
        try:
            value = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    if not isinstance(value, Mapping):
        return arguments
    schema = definition.input_schema
    stripped = _strip(value, schema, schema)
    if stripped == value:
        return arguments
    if isinstance(arguments, str | bytes):
        return json.dumps(stripped, ensure_ascii=False, separators=(",", ":"))
    result: Mapping[str, Any] = stripped
    return result


def _strip(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    if isinstance(value, Mapping):
        chosen = _select(schema, "object", root)
        properties = None if chosen is None else chosen.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = chosen.get("required", ()) if chosen is not None else ()
        out = {}
        for key, item in value.items():
            child = properties.get(key, _ABSENT)
            if child is _ABSENT:
                out[key] = item
            elif item is None and key not in required and not admits(child, "null", root):
                continue
            else:
                out[key] = _strip(item, child, root)
        return out
    if isinstance(value, list):
        chosen = _select(schema, "array", root)
        if chosen is None or "items" not in chosen:
            return value
        return [_strip(item, chosen["items"], root) for item in value]
    return value


def parameters(
    definition: pegboard.ToolDefinition, provider: str, profile: Profile | None
) -> dict[str, Any]:
    """The input schema to send: a plain copy, or converted to ``profile``'s strict subset."""
    if profile is not None:
        return convert(profile, definition.name, definition.input_schema)
    schema = definition.input_schema
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise CompatibilityError(
            "the input schema must be an object type at its root",
            provider=provider,
            tool=definition.name,
            path="$",
            rule="root-object",
        )
    plain: dict[str, Any] = pegboard.thaw(schema)
    return plain
