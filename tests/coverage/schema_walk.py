"""Walks the MCP JSON Schema of one protocol version and enumerates the string
positions of a message definition, then builds, for one position, a minimal valid
instance of the message with a marker at that position (every other string a benign
filler).

A position is a path of steps from the message's root:
  ("p", name)   object property
  ("i",)        array item
  ("b", label)  one branch of anyOf/oneOf/a type list (label: the $ref's name or type)
  ("k",)        a free-form object's key (additionalProperties, `_meta`, `{}`)
  ("v",)        the value under that key
and its last step decides the kind: a string value, or a key ("k").

Strings whose schema is an `enum` or a `const` are protocol vocabulary, not
positions: no instance can hold a marker there and stay valid.
"""

import copy
import json

MAX_REPEAT = 2  # a definition may recur this often on one path (recursive schemas)


class Schema:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.defs = self.doc.get("definitions") or self.doc.get("$defs") or {}
        self.draft = self.doc.get("$schema", "")

    def has(self, name):
        return name in self.defs

    def resolve(self, node):
        """(node without $ref, name of the definition it came from or None)."""
        name = None
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            name = ref.rsplit("/", 1)[-1]
            node = {**self.defs[name], **{k: v for k, v in node.items() if k not in ("$ref", "description")}}
            seen += 1
            if seen > 20:
                raise ValueError(f"$ref loop at {ref}")
        if isinstance(node, dict) and "allOf" in node:
            merged = {k: v for k, v in node.items() if k != "allOf"}
            for part in node["allOf"]:
                part, _ = self.resolve(part)
                for k, v in part.items():
                    if k == "properties":
                        merged.setdefault("properties", {}).update(v)
                    elif k == "required":
                        merged["required"] = sorted(set(merged.get("required", [])) | set(v))
                    else:
                        merged.setdefault(k, v)
            node = merged
        return node, name

    def branches(self, node):
        """The alternatives of a node, as (label, node), or None."""
        for key in ("anyOf", "oneOf"):
            if key in node:
                out = []
                for i, b in enumerate(node[key]):
                    r, name = self.resolve(b)
                    label = name or (r.get("type") if isinstance(r.get("type"), str) else None) or str(i)
                    out.append((label, b))
                return out
        t = node.get("type")
        if isinstance(t, list):
            return [(x, {**{k: v for k, v in node.items() if k != "type"}, "type": x}) for x in t]
        return None


def is_vocabulary(node):
    return "enum" in node or "const" in node


def free_form(node):
    """Whether an object node takes keys of its own choosing, and their schema."""
    ap = node.get("additionalProperties")
    if ap is False:
        return None
    if ap is None:
        if node.get("properties") or node.get("patternProperties"):
            return None
        return {}
    return {} if ap is True else ap


def positions(schema, node, path=(), stack=()):
    """Every string position under node: a list of (steps, facts)."""
    node, name = schema.resolve(node)
    if name is not None:
        if stack.count(name) >= MAX_REPEAT:
            return []
        stack = stack + (name,)
    br = schema.branches(node)
    if br is not None:
        out = []
        for label, b in br:
            out.extend(positions(schema, b, path + (("b", label),), stack))
        return out
    t = node.get("type")
    if t == "string":
        if is_vocabulary(node):
            return []
        return [(path, {"format": node.get("format"), "encoding": node.get("contentEncoding")})]
    if t == "array":
        return positions(schema, node.get("items", {}), path + (("i",),), stack)
    if t == "object":
        out = []
        for prop, sub in (node.get("properties") or {}).items():
            out.extend(positions(schema, sub, path + (("p", prop),), stack))
        ff = free_form(node)
        if ff is not None:
            out.append((path + (("k",),), {}))
            out.extend(positions(schema, ff, path + (("v",),), stack))
        return out
    if t is None and not node.get("properties") and "items" not in node:
        # `{}`: any JSON value. A string here, and a free-form object (key and value).
        return [
            (path + (("b", "string"),), {}),
            (path + (("b", "object"), ("k",)), {}),
            (path + (("b", "object"), ("v",)), {}),
        ]
    if t is None and node.get("properties"):
        return positions(schema, {**node, "type": "object"}, path, stack)
    return []


def show(steps):
    """A position as text: content[]<TextContent>.text, _meta{key}, _meta{*}."""
    out = ""
    for s in steps:
        if s[0] == "p":
            out += ("." if out else "") + s[1]
        elif s[0] == "i":
            out += "[]"
        elif s[0] == "b":
            out += f"<{s[1]}>"
        elif s[0] == "k":
            out += "{key}"
        elif s[0] == "v":
            out += "{*}"
    return out or "(root)"


def filler_string(node):
    fmt = node.get("format")
    if fmt == "uri":
        return "file:///probe.txt"
    if fmt == "uri-template":
        return "file:///probe/{name}"
    if fmt == "byte" or node.get("contentEncoding") == "base64":
        return "AAAA"
    if fmt == "date-time":
        return "2025-01-01T00:00:00Z"
    return "probe"


def minimal(schema, node, stack=()):
    """A minimal valid instance: required properties only, benign fillers."""
    node, name = schema.resolve(node)
    if name is not None:
        stack = stack + (name,)
    if "const" in node:
        return copy.deepcopy(node["const"])
    if "enum" in node:
        return copy.deepcopy(node["enum"][0])
    br = schema.branches(node)
    if br is not None:
        # The first branch that is not a recursion back into a definition on the stack.
        for _, b in br:
            r, n = schema.resolve(b)
            if n is None or n not in stack:
                return minimal(schema, b, stack)
        return minimal(schema, br[0][1], stack)
    t = node.get("type")
    if t == "string":
        return filler_string(node)
    if t in ("number", "integer"):
        return node.get("minimum", 0)
    if t == "boolean":
        return False
    if t == "null":
        return None
    if t == "array":
        return []
    if t == "object" or node.get("properties"):
        return {
            p: minimal(schema, node["properties"][p], stack)
            for p in node.get("required", [])
            if p in (node.get("properties") or {})
        }
    return {}


def build(schema, node, steps, marker, stack=(), vkey="probe_key"):
    """A minimal instance of node with `marker` at the position `steps`."""
    node, name = schema.resolve(node)
    if name is not None:
        stack = stack + (name,)
    if not steps:
        return marker
    step, rest = steps[0], steps[1:]
    if step[0] == "b":
        br = schema.branches(node)
        if br is None:
            # `{}` read as a string or an object.
            if step[1] == "string":
                return build(schema, {"type": "string"}, rest, marker, stack, vkey)
            return build(schema, {"type": "object"}, rest, marker, stack, vkey)
        for label, b in br:
            if label == step[1]:
                return build(schema, b, rest, marker, stack, vkey)
        raise KeyError(f"no branch {step[1]}")
    if step[0] == "i":
        return [build(schema, node.get("items", {}), rest, marker, stack, vkey)]
    if step[0] == "p":
        obj = minimal(schema, node, stack)
        if not isinstance(obj, dict):
            obj = {}
        obj[step[1]] = build(schema, node["properties"][step[1]], rest, marker, stack, vkey)
        return obj
    if step[0] in ("k", "v"):
        obj = minimal(schema, {**node, "type": "object"}, stack)
        if not isinstance(obj, dict):
            obj = {}
        ff = free_form(node) if node.get("type") == "object" else {}
        if step[0] == "k":
            obj[marker] = minimal(schema, ff, stack) if ff else "probe"
        else:
            obj[vkey] = build(schema, ff if ff is not None else {}, rest, marker, stack, vkey)
        return obj
    raise ValueError(step)


def validator_node(schema, node):
    """A jsonschema validator of one schema node (the instance generator's check)."""
    import jsonschema

    key = "definitions" if "definitions" in schema.doc else "$defs"
    doc = {"$schema": schema.draft, key: schema.defs, **node}
    cls = jsonschema.validators.validator_for(doc)
    return cls(doc)
