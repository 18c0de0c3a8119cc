"""Splitting YAML/JSON text into Kubernetes documents, safely and with positions for error messages.

Input is untrusted (`karp apply`, the NodePool editor, catalog uploads, the Kubernetes API's request bodies), so the
loader bounds what a small text can make: the file's size, its nodes counting what aliases expand to, its nesting
depth and each object's encoded size, all checked while composing, before any Python object is built. Values are
what JSON can hold, as the API server's YAML-to-JSON step leaves them: timestamps stay strings, `!!binary`/`!!set`
and NaN are refused, integers fit int64, and a key given twice is an error rather than silently the last one (or,
for the API, whose `fieldValidation` decides, a `RepeatedField` reported to the caller). JSON text gets the same
bounds from `load_json`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from provisioner.manifests.errors import ManifestError

try:  # libyaml parses ~10x faster than PyYAML's pure-Python parser; composing stays in Python for the checks below
    from yaml.cyaml import CParser as _Parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser as _ParserOnly
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, _ParserOnly):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            _ParserOnly.__init__(self)


MAX_BYTES = 4 * 1024 * 1024
MAX_DOCUMENTS = 2000
# The API server refuses objects over 1.5 MiB (etcd's request limit); the same bound for each object here.
MAX_OBJECT_BYTES = 3 * 1024 * 1024 // 2
# Every YAML node costs ~1 KB while composing: 200,000 bound a file to ~200 MB and ~3 s, and hold 2,000 Deployments.
MAX_NODES = 200_000
# Aliases may add this many nodes beyond those written in the file. Hand-written manifests share label sets or
# container snippets with anchors, and kubectl accepts them, so aliases are not refused outright; a 700-byte
# "billion laughs" file would add 10^9.
MAX_ALIAS_NODES = 10_000
# Real manifests nest ~15 levels (a Deployment's pod affinity); 100 keeps every one and the parser's recursion small.
MAX_DEPTH = 100
_INT64 = 2**63
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")
_MERGE = "tag:yaml.org,2002:merge"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
# What JSON can hold; !!binary, !!set, !!omap, !!pairs and application tags (!!python/...) are refused.
_JSON_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "str", "timestamp", "seq", "map", "merge")
)


@dataclass(frozen=True, slots=True)
class RepeatedField:
    """A key given twice in one object: its field path, the key, and the line of its second value (YAML only)."""

    field: str
    key: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Document:
    """One object from a file: its 1-based position and its parsed body."""

    index: int
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.body.get("apiVersion") or "")

    @property
    def name(self) -> str:
        meta = self.body.get("metadata")
        return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def decode(data: bytes, source: str) -> str:
    """Bytes from a file, standard input or an upload as text; anything but UTF-8 is refused, naming the source."""
    if len(data) > MAX_BYTES:
        raise ManifestError(f"{source}: larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        return data.decode()
    except UnicodeDecodeError as error:
        raise ManifestError(
            f"{source}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})"
        ) from None


def read_stream(stream: Any, source: str) -> str:
    """A stream's text (standard input), at most MAX_BYTES read; a binary stream must hold UTF-8."""
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # already text (a test's StringIO)
        text: str = stream.read(MAX_BYTES + 1)
        return text
    return decode(buffer.read(MAX_BYTES + 1), source)


def load_documents(text: str) -> list[Document]:
    """Parse every document (empty ones skipped, `kind: List` expanded); each needs apiVersion and kind."""
    bodies: list[Any] = []
    for doc in _parse(text):
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            bodies.extend(doc["items"])
        else:
            bodies.append(doc)
    if len(bodies) > MAX_DOCUMENTS:
        raise ManifestError(f"too many documents: {len(bodies)} (at most {MAX_DOCUMENTS})")
    documents = []
    for index, body in enumerate(bodies, start=1):
        if not isinstance(body, dict):
            raise ManifestError("expected an object with apiVersion and kind", document=index)
        for required in ("apiVersion", "kind"):
            if not isinstance(body.get(required), str) or not body[required]:
                raise ManifestError(f"{required} is required", field=required, document=index)
        documents.append(Document(index, _bounded(body, index)))
    return documents


def load_document(text: str, repeated: list[RepeatedField] | None = None) -> Any:
    """The one document of a text (the NodePool editor's YAML, an API request's), under the same bounds; None when
    it is empty. A key given twice is refused, or added to `repeated` when it is given."""
    docs = _parse(text, repeated)
    if len(docs) > 1:
        raise ManifestError(f"expected one document, found {len(docs)}")
    return _bounded(docs[0], None) if docs else None


def load_json(text: str, repeated: list[RepeatedField] | None = None) -> Any:
    """A JSON text (an API request's body, an annotation holding JSON) under the bounds YAML gets: nested at most
    MAX_DEPTH, no NaN or Infinity, integers within int64, no NUL or lone surrogate, at most MAX_OBJECT_BYTES
    encoded. A key given twice is refused, or added to `repeated` when it is given."""
    if len(text) > MAX_BYTES:
        raise ManifestError(f"the document is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    twice: dict[int, tuple[dict[str, Any], list[str]]] = {}  # id(object) -> the object (kept alive), its keys

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) < len(items):
            seen: set[str] = set()
            keys = []
            for key, _ in items:
                if key in seen:
                    keys.append(key)
                seen.add(key)
            twice[id(obj)] = (obj, keys)
        return obj

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constant, parse_int=_int64)
    except ManifestError:
        raise
    except RecursionError:  # the C decoder recurses per level: 5,000 nested brackets reach Python's limit
        raise ManifestError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise ManifestError(_short(str(error), 200)) from None
    _check_tree(value, {key: keys for key, (_, keys) in twice.items()}, repeated)
    _encoded_size(value, None)
    return value


def _no_constant(name: str) -> Any:
    raise ManifestError(f"must be a finite number, got {name}")


def _int64(text: str) -> int:
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise ManifestError(f"integer {_short(text)} is out of range (int64)")
    return value


def _check_tree(root: Any, twice: dict[int, list[str]], repeated: list[RepeatedField] | None) -> None:
    """Depth, text and repeated keys of decoded JSON, walked without recursion (it may be as deep as Python's
    recursion limit allowed the decoder), in document order."""
    if isinstance(root, float) and not math.isfinite(root):  # a bare 1e999: nothing else would look at it
        raise ManifestError(f"must be a finite number, got {root}")
    stack: list[tuple[Any, str, int]] = [(root, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ManifestError(f"nested deeper than {MAX_DEPTH} levels")
        children: list[tuple[Any, str]] = []
        if isinstance(node, dict):
            for key in twice.get(id(node), ()):
                field = f"{path}.{key}" if path else key
                if repeated is None:
                    raise ManifestError(f'duplicate field "{_short(key)}"', field=field)
                repeated.append(RepeatedField(field, key))
            children = [(child, f"{path}.{key}" if path else key) for key, child in node.items()]
            for key, _ in node.items():
                _check_text(key, path)
        elif isinstance(node, list):
            children = [(child, f"{path}[{index}]") for index, child in enumerate(node)]
        for child, field in reversed(children):
            if isinstance(child, dict | list):
                stack.append((child, field, depth + 1))
            elif isinstance(child, str):
                _check_text(child, field)
            elif isinstance(child, float) and not math.isfinite(child):  # 1e999 decodes past a float's range
                raise ManifestError(f"must be a finite number, got {child}", field=field)


def _check_text(text: str, field: str) -> None:
    if _BAD_TEXT.search(text):
        raise ManifestError("NUL characters and lone surrogates are not allowed", field=field)


def _parse(text: str, repeated: list[RepeatedField] | None = None) -> list[Any]:
    if len(text) > MAX_BYTES or len(text.encode()) > MAX_BYTES:
        raise ManifestError(f"the manifest is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    loader = _Loader(text)
    loader.repeated = repeated
    try:
        docs = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            doc = loader.get_data()
            if doc is not None:
                docs.append(doc)
        return docs
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ManifestError(f"malformed YAML{where}: {problem}") from None
    finally:
        loader.dispose()


def _bounded(body: Any, index: int | None) -> Any:
    """The body as JSON has it (no object shared between two places, keys as strings), within MAX_OBJECT_BYTES."""
    return json.loads(_encoded_size(body, index))


def _encoded_size(body: Any, index: int | None) -> str:
    """The body encoded as compact JSON, refused when over MAX_OBJECT_BYTES."""
    encoded = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    size = len(encoded.encode())
    if size > MAX_OBJECT_BYTES:
        raise ManifestError(
            f"the object is {size} bytes encoded, over the API server's limit of {MAX_OBJECT_BYTES} (1.5 MiB)",
            document=index,
        )
    return encoded


class _Loader(Composer, _Parser, SafeConstructor, Resolver):  # type: ignore[misc, valid-type]
    # Composer before the parser: libyaml's parser brings its own composer, which would skip these checks.
    """PyYAML's safe loader with the bounds of this module enforced while composing and constructing."""

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.nodes = 0  # written plus alias-expanded, over the whole file
        self.aliased = 0
        self.depth = 0
        self.path: list[str] = []
        self.sizes: dict[int, int] = {}  # id(node) -> nodes it expands to, once composed
        self.repeated: list[RepeatedField] | None = None  # where repeated keys go instead of an error

    # Composing -------------------------------------------------------------------------------------------------

    def compose_document(self) -> Node | None:
        self.sizes = {}  # a document's nodes live until it is built, so ids are unique within one
        return Composer.compose_document(self)

    def compose_node(self, parent: Node | None, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event: Any = self.peek_event()
            anchored = self.anchors.get(event.anchor)
            if anchored is not None:
                size = self.sizes.get(id(anchored))
                if size is None:
                    raise ManifestError(
                        f"{self._where(event)}: alias *{event.anchor} refers to a node that holds it",
                        field=self._field(),
                    )
                self.aliased += size
                self._count(size, event)
                if self.aliased > MAX_ALIAS_NODES:
                    raise ManifestError(
                        f"{self._where(event)}: YAML aliases expand to more than {MAX_ALIAS_NODES} nodes",
                        field=self._field(),
                    )
            return Composer.compose_node(self, parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ManifestError(f"{self._where(self.peek_event())}: nested deeper than {MAX_DEPTH} levels")
        self._count(1, self.peek_event())
        self.path.append(_step(index))
        try:
            node: Any = Composer.compose_node(self, parent, index)
            if node.tag not in _JSON_TAGS:
                raise ManifestError(f"unsupported YAML tag {_short(node.tag)}", field=self._field())
            if isinstance(node, ScalarNode):
                self._check_scalar(node)
        finally:
            self.depth -= 1
            self.path.pop()
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        self.sizes[id(node)] = 1 + sum(self.sizes[id(child)] for child in children)
        return node

    def compose_mapping_node(self, anchor: Any) -> Any:
        node: MappingNode = Composer.compose_mapping_node(self, anchor)
        seen: dict[str, Any] = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE:
                continue
            if key.value in seen:
                first = seen[key.value]
                self.path.append(_step(key))
                field = self._field()
                self.path.pop()
                if self.repeated is not None:
                    self.repeated.append(RepeatedField(field, key.value, value.start_mark.line + 1))
                    continue
                raise ManifestError(
                    f'duplicate field "{key.value}" at line {key.start_mark.line + 1} (first at line {first.line + 1})',
                    field=field,
                )
            seen[key.value] = key.start_mark
        return node

    def _count(self, nodes: int, event: Any) -> None:
        self.nodes += nodes
        if self.nodes > MAX_NODES:
            raise ManifestError(f"{self._where(event)}: more than {MAX_NODES} YAML nodes")

    def _field(self) -> str:
        return "".join(step if step.startswith("[") else f".{step}" for step in self.path if step).lstrip(".")

    @staticmethod
    def _where(event: Any) -> str:
        mark = event.start_mark
        return f"line {mark.line + 1}, column {mark.column + 1}"

    def _check_scalar(self, node: ScalarNode) -> None:
        """Refuse, naming the field, a value JSON (and so the API server and the database) cannot hold."""
        problem = ""
        if node.tag == _INT:
            value = SafeConstructor.construct_yaml_int(self, node)
            if not -_INT64 <= value < _INT64:
                problem = f"integer {_short(node.value)} is out of range (int64)"
        elif node.tag == _FLOAT:
            if not math.isfinite(SafeConstructor.construct_yaml_float(self, node)):
                problem = f"must be a finite number, got {_short(node.value)}"
        elif _BAD_TEXT.search(node.value):
            problem = "NUL characters and lone surrogates are not allowed"
        if problem:
            raise ManifestError(problem, field=self._field())


def _step(index: Any) -> str:
    """The path step composing a child adds: a mapping value is named by its key, a list item by its position."""
    if isinstance(index, ScalarNode):
        return _short(str(index.value))
    if isinstance(index, int):
        return f"[{index}]"
    return ""


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


# A timestamp is a string to Kubernetes (creationTimestamp, lastTransitionTime); JSON has no other kind.
_Loader.add_constructor("tag:yaml.org,2002:timestamp", SafeConstructor.construct_yaml_str)  # type: ignore[type-var]
