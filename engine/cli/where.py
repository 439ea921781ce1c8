"""``--where`` text to the engine's DNF filter.

Grammar (keywords case-insensitive)::

    filter := conj ("OR" conj)*
    conj   := cond ("AND" cond)*
    cond   := column op literal | column ["NOT"] "IN" "(" literal ("," literal)* ")" | column "IS" ["NOT"] "NULL"
    op     := = == != <> < <= > >=
    literal:= 'text' | "text" | number | true | false | NULL | bare-word (taken as text)

``parse_where("dt = '2024-01-02' AND id > 5")`` returns ``[[("dt", "=", "2024-01-02"), ("id", ">", 5)]]``.
Raises InvalidInput with the offending position for anything else. Literals are cast to the column types later,
by the reader (engine.read.predicate); a number with a point or exponent is the exact ``Decimal`` written (a
float column gets the nearest float, a DECIMAL column refuses it when its scale cannot hold it). An unquoted NULL
is the null literal, as in SQL and Paimon's predicates: ``IN (1, NULL)`` is ``IN (1)``, ``NOT IN (1, NULL)``
matches no row, and ``= NULL`` is refused by the reader (use IS NULL); it is never the text 'null' (quote it).
"""
from __future__ import annotations

import re
from decimal import Decimal

from engine.errors import InvalidInput

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<op><=|>=|!=|<>|==|=|<|>)
  | (?P<punct>[(),])
  | (?P<word>[^\s(),=<>!'"]+)
)""", re.VERBOSE)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?)$", re.IGNORECASE)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise InvalidInput(f"--where: cannot read {text[pos:].strip()!r} (at character {pos + 1})")
        kind = m.lastgroup
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


def _literal(kind: str, value: str):
    if kind == "str":
        quote = value[0]
        return value[1:-1].replace(quote * 2, quote)
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if _NUMBER.match(value):
        return Decimal(value) if any(c in value for c in ".eE") else int(value)
    return value


def parse_where(text: str) -> list[list[tuple]]:
    """Parse one ``--where`` expression into DNF (see the module docstring)."""
    toks = _tokens(text)
    if not toks:
        raise InvalidInput("--where is empty")
    i = 0

    def peek(k=0):
        return toks[i + k] if i + k < len(toks) else (None, None, len(text))

    def fail(msg: str):
        _, value, pos = peek()
        where = f"at {value!r} (character {pos + 1})" if value is not None else "at the end"
        raise InvalidInput(f"--where {text!r}: {msg} {where}")

    def literal():
        nonlocal i
        kind, value, _ = peek()
        if kind not in ("str", "word"):
            fail("expected a value")
        i += 1
        return _literal(kind, value)

    def condition():
        nonlocal i
        kind, column, _ = peek()
        if kind != "word":
            fail("expected a column name")
        i += 1
        kind, value, _ = peek()
        if kind == "word" and value.lower() == "is":
            i += 1
            negate = peek()[0] == "word" and peek()[1].lower() == "not"
            i += negate
            if not (peek()[0] == "word" and peek()[1].lower() == "null"):
                fail("expected NULL or NOT NULL after IS")
            i += 1
            return (column, "is not null" if negate else "is null", None)
        negate = False
        if kind == "word" and value.lower() == "not":
            negate, i = True, i + 1
            kind, value, _ = peek()
        if kind == "word" and value.lower() == "in":
            i += 1
            if peek()[1] != "(":
                fail("expected '(' after IN")
            i += 1
            values = [literal()]
            while peek()[1] == ",":
                i += 1
                values.append(literal())
            if peek()[1] != ")":
                fail("expected ',' or ')'")
            i += 1
            return (column, "not in" if negate else "in", tuple(values))
        if negate:
            fail("expected IN after NOT")
        if kind != "op":
            fail("expected an operator (=, !=, <, <=, >, >=, IN, IS NULL)")
        i += 1
        op = "!=" if value == "<>" else value
        return (column, op, literal())

    disjunction = []
    while True:
        conj = [condition()]
        while peek()[0] == "word" and peek()[1].lower() == "and":
            i += 1
            conj.append(condition())
        disjunction.append(conj)
        if peek()[0] == "word" and peek()[1].lower() == "or":
            i += 1
            continue
        break
    if i != len(toks):
        fail("expected AND, OR or the end")
    return disjunction


def combine(wheres: list[str]) -> list[list[tuple]] | None:
    """Several ``--where`` options are ANDed: (a OR b) AND c -> (a AND c) OR (b AND c)."""
    result = None
    for text in wheres:
        dnf = parse_where(text)
        result = dnf if result is None else [x + y for x in result for y in dnf]
    return result
