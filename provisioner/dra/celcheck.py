"""Static checks of a CEL device selector before it runs: the names it uses, the type it yields, and a bound on how
much work evaluating it can take.

Kubernetes type-checks DeviceClass selectors at apply time and refuses those whose estimated cost exceeds
CELSelectorExpressionMaxCost (cel-go's checker and cost estimator). common-expression-language has neither, nor any
cost tracking while it runs, so this module parses the expression itself (once the library has accepted its
syntax) and computes, without evaluating anything:

* the free names: only `device`, the comprehension variables and type names exist; functions must be ones the
  evaluator provides (FUNCTIONS); `device` has only driver, attributes, capacity and allowMultipleAllocations;
* the result type where it is known statically (`1 + 2` is an int, so it can never select a device);
* an upper bound on the cost: every node visited costs a unit, every comprehension step its body's cost, every
  operation that walks a string or a list the size it walks. Sizes are bounded too: a literal list has its length,
  the device's maps and strings have Kubernetes' limits (DeviceBounds), and what a comprehension builds has the
  size of its range. So the bound covers every device within those limits: nothing runs longer than the bound says.
  The library's `map` and `filter` copy their result list on every step (measured: 4,000 elements take 1.2 s), so
  they are charged n²/2 for the copies. One unit is about 0.1 µs of this evaluator's time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_NESTING = 32  # parentheses, lists, calls: the library itself stops near 95; selectors nest a few levels
_CAP = 10**15  # sizes and costs saturate here: enough to exceed any limit, small enough to stay cheap
ITERATION = 3  # a comprehension step's own cost besides its body (measured ~0.5 µs a step)


class CELCheckError(ValueError):
    """A selector that fails a static check, with the position it concerns."""


@dataclass(frozen=True, slots=True)
class DeviceBounds:
    """How large a device can be, as CEL sees it: attribute/capacity domains, entries in one, characters in a name
    or value. Kubernetes allows 32 attributes and capacities a device and 64 characters a value."""

    domains: int = 32
    entries: int = 32
    text: int = 64


KUBERNETES_BOUNDS = DeviceBounds()


@dataclass(frozen=True, slots=True)
class Value:
    """What is known of a value before evaluation: its CEL type ("dyn" when only the device decides) and an upper
    bound on its size: `length` elements (list, map) or characters (string, bytes), 1 for a number; `element`
    bounds each element of a list, or each key and value of a map."""

    type: str
    length: int = 1
    element: Value | None = None

    def total(self) -> int:
        """Scalars and characters in the value, at most: what walking all of it visits."""
        if self.element is None:
            return self.length
        return _sat(self.length * self.element.total())


def _sat(number: int) -> int:
    return min(number, _CAP)


def _join(a: Value | None, b: Value | None) -> Value | None:
    """A bound holding for either value."""
    if a is None or b is None:
        return a or b
    return Value(a.type if a.type == b.type else "dyn", max(a.length, b.length), _join(a.element, b.element))


# Functions the evaluator provides (the library's standard ones and those cel.py registers), with the type they
# return ("" for their first argument's) and the work they do: "const", "linear" in their arguments' size, or the
# "product" of the two (a regular expression match).
FUNCTIONS: dict[str, tuple[str, str]] = {
    "size": ("int", "const"),
    "contains": ("bool", "linear"),
    "startsWith": ("bool", "linear"),
    "endsWith": ("bool", "linear"),
    "matches": ("bool", "product"),
    "int": ("int", "linear"),
    "uint": ("uint", "linear"),
    "double": ("double", "linear"),
    "string": ("string", "linear"),
    "bytes": ("bytes", "linear"),
    "dyn": ("", "const"),
    "type": ("type", "const"),
    "timestamp": ("timestamp", "linear"),
    "duration": ("duration", "linear"),
    **{
        accessor: ("int", "const")
        for accessor in (
            "getFullYear",
            "getMonth",
            "getDate",
            "getDayOfMonth",
            "getDayOfWeek",
            "getDayOfYear",
            "getHours",
            "getMinutes",
            "getSeconds",
            "getMilliseconds",
        )
    },
    # Kubernetes' quantity library, as cel.py provides it (a quantity is an int of milli-units).
    "quantity": ("int", "linear"),
    "compareTo": ("int", "const"),
    "isGreaterThan": ("bool", "const"),
    "isLessThan": ("bool", "const"),
    "isInteger": ("bool", "const"),
    "asInteger": ("int", "const"),
    "sign": ("int", "const"),
    "asApproximateFloat": ("double", "const"),
}
MACROS = ("all", "exists", "exists_one", "map", "filter")
TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "dyn"})
DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")

# Parsing ----------------------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
    |(?P<string>
        (?:[rR][bB]?|[bB][rR])(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'[^'\n\r]*'|"[^"\n\r]*")
        |[bB]?(?:'''(?:\\[\s\S]|[^\\])*?'''|\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n\r])*'|"(?:\\.|[^"\\\n\r])*")
    )
    |(?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]+\.[0-9]+|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?[uU]?)
    |(?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
    |(?P<op>\|\||&&|==|!=|<=|>=|[<>+\-*/%!?:.,()\[\]{}])
    """,
    re.VERBOSE,
)
_PRECEDENCE = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "in": 3, "+": 4, "-": 4}
_PRECEDENCE.update({"*": 5, "/": 5, "%": 5})


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # string, number, ident, op, end
    text: str
    pos: int


@dataclass(frozen=True, slots=True)
class Node:
    """One expression. Chains are flat (`a + b - c` is one node with ops ("+", "-"); `a.b[c].d()` is a primary and
    its steps), so the tree is only as deep as the expression's nesting."""

    kind: str  # literal, ident, call, list, map, op, unary, ternary, member
    pos: int
    value: str = ""  # a literal's type, an identifier, a function's name
    length: int = 1  # a string literal's length bound
    args: tuple[Node, ...] = ()
    ops: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True, slots=True)
class Step:
    """A postfix step: `.name`, `[index]` or `.name(args)`."""

    kind: str  # field, index, call
    pos: int
    name: str = ""
    args: tuple[Node, ...] = field(default=())


def _tokens(text: str) -> Iterator[Token]:
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CELCheckError(f"{_where(text, pos)}: unexpected character {text[pos]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            yield Token(kind, match.group(), pos)
        pos = match.end()
    yield Token("end", "", len(text))


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {column}"


class _Parser:
    """Recursive descent over CEL's grammar; the library has accepted the syntax already."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = list(_tokens(text))
        self.position = 0
        self.depth = 0

    def parse(self) -> Node:
        node = self.expression()
        if self.peek().kind != "end":
            self.fail(self.peek(), f"cannot analyse the expression from {self.peek().text!r}")
        return node

    def peek(self) -> Token:
        return self.tokens[self.position]

    def next(self) -> Token:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token.kind == "op" and token.text == text:
            self.position += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            self.fail(self.peek(), f"expected {text!r}")

    def fail(self, token: Token, message: str) -> None:
        raise CELCheckError(f"{_where(self.text, token.pos)}: {message}")

    def expression(self) -> Node:
        start = self.peek()
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(start, f"nested deeper than {MAX_NESTING} levels")
        try:
            condition = self.binary(1)
            if not self.accept("?"):
                return condition
            parts = [condition]  # c1, then1, c2, then2, ..., else: `?:` associates to the right
            while True:
                parts.append(self.expression())
                self.expect(":")
                parts.append(self.binary(1))
                if not self.accept("?"):
                    return Node("ternary", start.pos, args=tuple(parts))
        finally:
            self.depth -= 1

    def operator(self) -> str | None:
        token = self.peek()
        if (token.kind == "op" or token.text == "in") and token.text in _PRECEDENCE:
            return token.text
        return None

    def binary(self, minimum: int) -> Node:
        start = self.peek()
        left = self.unary()
        while (op := self.operator()) is not None and _PRECEDENCE[op] >= minimum:
            level = _PRECEDENCE[op]
            operands, ops = [left], []
            while op is not None and _PRECEDENCE[op] == level:
                self.next()
                ops.append(op)
                operands.append(self.binary(level + 1))
                op = self.operator()
            left = Node("op", start.pos, args=tuple(operands), ops=tuple(ops))
        return left

    def unary(self) -> Node:
        start = self.peek()
        ops = []
        while start.kind == "op" and start.text in ("!", "-"):
            ops.append(self.next().text)
            start = self.peek()
        operand = self.postfix()
        return Node("unary", start.pos, args=(operand,), ops=tuple(ops)) if ops else operand

    def postfix(self) -> Node:
        start = self.peek()
        primary = self.primary()
        steps = []
        while True:
            token = self.peek()
            if self.accept("."):
                name = self.next()
                if name.kind != "ident":
                    self.fail(name, "expected a field or method name")
                if self.accept("("):
                    steps.append(Step("call", token.pos, name.text, self.arguments(")")))
                else:
                    steps.append(Step("field", token.pos, name.text))
            elif self.accept("["):
                steps.append(Step("index", token.pos, args=(self.expression(),)))
                self.expect("]")
            else:
                break
        return Node("member", start.pos, args=(primary,), steps=tuple(steps)) if steps else primary

    def arguments(self, close: str) -> tuple[Node, ...]:
        items = []
        while not self.accept(close):
            items.append(self.expression())
            if not self.accept(","):
                self.expect(close)
                break
        return tuple(items)

    def primary(self) -> Node:
        token = self.next()
        if token.kind == "number":
            text = token.text.lower()
            kind = (
                "uint"
                if text.endswith("u")
                else "double"
                if ("." in text or "e" in text) and "x" not in text
                else "int"
            )
            return Node("literal", token.pos, kind)
        if token.kind == "string":
            kind = "bytes" if token.text[0] in "bB" or token.text[:2].lower() == "rb" else "string"
            return Node("literal", token.pos, kind, length=max(len(token.text), 1))
        if token.kind == "op" and token.text == ".":  # `.name`: the root scope's name
            token = self.next()
            if token.kind != "ident":
                self.fail(token, "expected a name after '.'")
        if token.kind == "ident":
            if token.text in ("true", "false"):
                return Node("literal", token.pos, "bool")
            if token.text == "null":
                return Node("literal", token.pos, "null")
            if self.accept("("):
                return Node("call", token.pos, token.text, args=self.arguments(")"))
            return Node("ident", token.pos, token.text)
        if token.kind == "op" and token.text == "(":
            node = self.expression()
            self.expect(")")
            return node
        if token.kind == "op" and token.text == "[":
            return Node("list", token.pos, args=self.arguments("]"))
        if token.kind == "op" and token.text == "{":
            entries: list[Node] = []
            while not self.accept("}"):
                entries.append(self.expression())
                self.expect(":")
                entries.append(self.expression())
                if not self.accept(","):
                    self.expect("}")
                    break
            return Node("map", token.pos, args=tuple(entries))
        self.fail(token, f"cannot analyse the expression at {token.text or 'its end'!r}")
        raise AssertionError  # fail() raised


def parse(expression: str) -> Node:
    return _Parser(expression).parse()


# Analysis ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Analysis:
    """What the checks found: the result's type, the cost bound, and whether the device is read at all."""

    type: str
    cost: int
    reads_device: bool


def analyse(expression: str, tree: Node, bounds: DeviceBounds) -> Analysis:
    """Check names and compute the result type and cost bound for devices within `bounds`; CELCheckError if a name
    is undeclared."""
    walker = _Walker(expression, bounds)
    value, cost = walker.walk(tree, {})
    return Analysis("map" if value.type == "device" else value.type, cost, walker.reads_device)


class _Walker:
    def __init__(self, text: str, bounds: DeviceBounds) -> None:
        self.text = text
        self.reads_device = False
        # Keys of any map: at most the device's text bound or the longest literal written.
        longest = max((len(t.text) for t in _tokens(text) if t.kind == "string"), default=1)
        key = Value("string", max(bounds.text, longest))
        value = Value("dyn", bounds.text)
        domain = Value("map", bounds.entries, _join(value, key))
        self.device_fields = {
            "driver": Value("string", bounds.text),
            "attributes": Value("map", bounds.domains, _join(domain, key)),
            "capacity": Value("map", bounds.domains, _join(Value("map", bounds.entries, key), key)),
            "allowMultipleAllocations": Value("bool"),
        }
        self.device = Value("device", len(DEVICE_FIELDS), _join(self.device_fields["attributes"], key))
        self.key = key

    def fail(self, pos: int, message: str) -> None:
        raise CELCheckError(f"{_where(self.text, pos)}: {message}")

    def walk(self, node: Node, scope: dict[str, Value]) -> tuple[Value, int]:
        """The value bound of `node` and the cost of evaluating it, with comprehension variables in `scope`."""
        kind = node.kind
        if kind == "literal":
            return Value(node.value, node.length if node.value in ("string", "bytes") else 1), 1
        if kind == "ident":
            return self.name(node, scope), 1
        if kind == "list":
            values, cost = self.each(node.args, scope)
            element = None
            for value in values:
                element = _join(element, value)
            return Value("list", len(values), element), _sat(cost + 1 + len(values))
        if kind == "map":
            values, cost = self.each(node.args, scope)
            element = None
            for value in values:
                element = _join(element, value)
            return Value("map", len(values) // 2, element), _sat(cost + 1 + len(values))
        if kind == "unary":
            value, cost = self.walk(node.args[0], scope)
            if "!" in node.ops:
                return Value("bool"), cost + len(node.ops)
            return Value(value.type if value.type in ("int", "double", "dyn") else "dyn"), cost + len(node.ops)
        if kind == "op":
            return self.operators(node, scope)
        if kind == "ternary":
            return self.ternary(node, scope)
        if kind == "call":
            values, cost = self.each(node.args, scope)
            if node.value == "has":
                return Value("bool"), cost + 1
            return self.function(node.value, node.pos, values, cost)
        return self.member(node, scope)

    def each(self, nodes: tuple[Node, ...], scope: dict[str, Value]) -> tuple[list[Value], int]:
        values, total = [], 0
        for node in nodes:
            value, cost = self.walk(node, scope)
            values.append(value)
            total = _sat(total + cost)
        return values, total

    def name(self, node: Node, scope: dict[str, Value]) -> Value:
        if node.value in scope:
            return scope[node.value]
        if node.value == "device":
            self.reads_device = True
            return self.device
        if node.value in TYPE_NAMES:
            return Value("type")
        self.fail(node.pos, f"undeclared reference to '{node.value}'")
        raise AssertionError

    def operators(self, node: Node, scope: dict[str, Value]) -> tuple[Value, int]:
        values, cost = self.each(node.args, scope)
        result = values[0]
        for op, right in zip(node.ops, values[1:], strict=True):
            left = result
            if op in ("||", "&&"):
                result, work = Value("bool"), 1
            elif op in ("==", "!=", "<", "<=", ">", ">="):
                result, work = Value("bool"), 1 + min(left.total(), right.total())
            elif op == "in":
                result, work = Value("bool"), 1 + right.total()
            elif op == "+":
                same = left.type if left.type == right.type else "dyn"
                if same in ("int", "uint", "double", "timestamp", "duration"):
                    result, work = Value(same), 1
                else:  # strings, bytes and lists concatenate; dyn may
                    joined = Value(same, _sat(left.length + right.length), _join(left.element, right.element))
                    result, work = joined, 1 + _sat(left.total() + right.total())
            else:
                same = left.type if left.type == right.type and left.type in ("int", "uint", "double") else "dyn"
                result, work = Value(same), 1
            cost = _sat(cost + work)
        return result, cost

    def ternary(self, node: Node, scope: dict[str, Value]) -> tuple[Value, int]:
        values, costs = [], []
        for part in node.args:
            value, cost = self.walk(part, scope)
            values.append(value)
            costs.append(cost)
        conditions = sum(costs[0:-1:2])
        branches = [*range(1, len(node.args) - 1, 2), len(node.args) - 1]
        result = None
        for index in branches:
            result = _join(result, values[index])
        assert result is not None
        return result, _sat(conditions + max(costs[i] for i in branches))

    def function(self, name: str, pos: int, args: list[Value], cost: int) -> tuple[Value, int]:
        if name not in FUNCTIONS:
            self.fail(pos, f"undeclared reference to '{name}'")
        returns, work = FUNCTIONS[name]
        sizes = [arg.total() for arg in args]
        if work == "linear":
            cost = _sat(cost + 1 + sum(sizes))
        elif work == "product":
            cost = _sat(cost + 1 + sum(sizes) + (sizes[0] * sizes[1] if len(sizes) > 1 else 0))
        else:
            cost += 1
        if not returns:
            return (args[0] if args else Value("dyn")), cost
        if returns in ("string", "bytes"):
            return Value(returns, max(sum(sizes), 32)), cost
        return Value(returns), cost

    def member(self, node: Node, scope: dict[str, Value]) -> tuple[Value, int]:
        primary = node.args[0]
        steps = node.steps
        if (
            primary.kind == "ident"
            and primary.value not in scope
            and primary.value not in ("device", *TYPE_NAMES)
            and steps[0].kind == "call"
        ):
            # `optional.of(1)`, `cel.bind(...)`, `math.abs(x)`: a namespaced function, none of which is provided
            self.fail(primary.pos, f"undeclared reference to '{primary.value}.{steps[0].name}'")
        value, cost = self.walk(primary, scope)
        for step in steps:
            if step.kind == "field":
                value = self.field(value, step)
                cost = _sat(cost + 1)
            elif step.kind == "index":
                index, index_cost = self.walk(step.args[0], scope)
                if value.type in ("string", "bytes", "int", "uint", "double", "bool", "null"):
                    self.fail(step.pos, f"{value.type} cannot be indexed")
                value = value.element or Value("dyn", value.length)
                cost = _sat(cost + 1 + index_cost + index.total())
            elif step.name in MACROS:
                value, cost = self.comprehension(value, step, scope, cost)
            else:
                values, args_cost = self.each(step.args, scope)
                value, cost = self.function(step.name, step.pos, [value, *values], _sat(cost + args_cost))
        return value, cost

    def field(self, value: Value, step: Step) -> Value:
        if value.type == "device":
            if step.name not in self.device_fields:
                self.fail(step.pos, f"undefined field '{step.name}' (device has {', '.join(DEVICE_FIELDS)})")
            return self.device_fields[step.name]
        if value.type in ("string", "bytes", "int", "uint", "double", "bool", "null", "list"):
            self.fail(step.pos, f"{value.type} has no field '{step.name}'")
        return value.element or Value("dyn", value.length)

    def comprehension(self, range_: Value, step: Step, scope: dict[str, Value], cost: int) -> tuple[Value, int]:
        variable, *body = step.args
        if variable.kind != "ident" or not body or len(body) > (2 if step.name == "map" else 1):
            self.fail(step.pos, f"{step.name}() takes a variable name and an expression")
        steps = range_.length
        # a list's variable is an element; a map's is a key
        item = range_.element if range_.type == "list" else _join(range_.element, self.key)
        inner = {**scope, variable.value: item or Value("dyn")}
        values, body_cost = self.each(tuple(body), inner)
        cost = _sat(cost + steps * (ITERATION + body_cost))
        if step.name not in ("map", "filter"):
            return Value("bool"), cost
        element = values[-1] if step.name == "map" else item
        copies = _sat(steps * (steps + 1) // 2 * (1 + (element.total() if element else 1)))
        return Value("list", steps, element), _sat(cost + copies)
