"""Recursive-descent parser and static type checker for JMS 1.1 selectors.

Precedence, loosest first, as in JMS 1.1 section 3.8.1.2: OR, AND, NOT,
comparison-level predicates (= <> < > <= >= [NOT] BETWEEN/LIKE/IN, IS [NOT]
NULL), + -, * / %, unary + -. Type errors that are visible from the text
(``'a' < 'b'``, ``TRUE > 0``, ``3 + 5`` as a whole selector) are reported
here, with the offset of the offending operand, so that a bad selector fails
at subscribe time rather than silently matching nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from relaymq.selector import runtime
from relaymq.selector.errors import InvalidSelector
from relaymq.selector.functions import FUNCTIONS
from relaymq.selector.lexer import LONG_MIN_MAGNITUDE, Kind, Token, iter_tokens
from relaymq.selector.nodes import (
    Arith,
    Between,
    Call,
    Compare,
    Ident,
    InList,
    IsNull,
    Like,
    Literal,
    Logic,
    Node,
    Not,
    Unary,
    VKind,
    children,
    describe_kinds,
)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: Deepest parenthesis/NOT/sign nesting accepted. Real selectors stay in
#: single digits; the bound keeps the parser's recursion far from Python's
#: stack limit whatever a client sends.
MAX_NESTING = 32
#: Deepest syntax tree accepted (AND/OR chains are flattened and do not count),
#: so generated code stays within what Python's own compiler accepts.
MAX_DEPTH = 50
#: Most operands of one flattened AND/OR chain. Compiling a selector costs more
#: than linear time in its length and runs on the broker's event loop, so a
#: client must not hand it a megabyte of ``a = 1 AND a = 1 AND ...``.
MAX_OPERANDS = 5000

_COMPARISON_OPS = frozenset({"=", "<>", "<", ">", "<=", ">="})
_ORDERING_OPS = frozenset({"<", ">", "<=", ">="})
_SCALAR = VKind.any_scalar()


def parse(text: str) -> Node | None:
    """Parse selector text; None for an empty selector (JMS: no selector)."""
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self._lexer = iter_tokens(text)
        self.tokens: list[Token] = [next(self._lexer)]  # read on as the parser looks ahead
        self.index = 0
        self.nesting = 0

    # ----------------------------------------------------------------- helpers

    def fail(self, reason: str, pos: int) -> InvalidSelector:
        return InvalidSelector(reason, pos, self.text)

    def peek(self, ahead: int = 0) -> Token:
        tokens = self.tokens
        want = self.index + ahead
        while want >= len(tokens) and tokens[-1].kind is not Kind.EOF:
            tokens.append(next(self._lexer))
        return tokens[min(want, len(tokens) - 1)]

    def advance(self) -> Token:
        tok = self.peek()
        if tok.kind is not Kind.EOF:
            self.index += 1
        return tok

    def at_keyword(self, word: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind is Kind.KEYWORD and tok.value == word

    def at_op(self, symbol: str) -> bool:
        tok = self.peek()
        return tok.kind is Kind.OP and tok.value == symbol

    def expect_keyword(self, word: str, context: str) -> Token:
        tok = self.peek()
        if not self.at_keyword(word):
            raise self.fail(f"expected {word} {context}, found {tok.describe()}", tok.pos)
        return self.advance()

    def expect_op(self, symbol: str, context: str) -> Token:
        tok = self.peek()
        if not self.at_op(symbol):
            raise self.fail(f"expected '{symbol}' {context}, found {tok.describe()}", tok.pos)
        return self.advance()

    def expect_string(self, context: str) -> Token:
        tok = self.peek()
        if tok.kind is not Kind.STRING:
            raise self.fail(f"expected a string literal {context}, found {tok.describe()}", tok.pos)
        return self.advance()

    def enter(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.fail(
                f"selector nests parentheses, NOT or signs more than {MAX_NESTING} deep",
                self.peek().pos,
            )

    def leave(self) -> None:
        self.nesting -= 1

    def finish(self, node: Node, kinds: VKind) -> Node:
        """Record a node's kinds and depth, enforcing the depth bound."""
        node.kinds = kinds
        subs = children(node)
        node.depth = 1 + max((c.depth for c in subs), default=0)
        if node.depth > MAX_DEPTH:
            raise self.fail(f"selector expression is nested more than {MAX_DEPTH} deep", node.pos)
        return node

    def require(self, node: Node, kinds: VKind, role: str) -> None:
        """Fail unless ``node`` may produce one of ``kinds``; never accept lists silently."""
        if not node.kinds & kinds:
            raise self.fail(
                f"{role} must be {describe_kinds(kinds)}, not {describe_kinds(node.kinds)}",
                node.pos,
            )
        if node.kinds & VKind.LIST and not kinds & VKind.LIST:
            raise self.fail(f"{role} must be {describe_kinds(kinds)}, not a list", node.pos)

    def condition(self, node: Node, role: str) -> Node:
        self.require(node, VKind.BOOL, role)
        return node

    # ----------------------------------------------------------------- grammar

    def parse(self) -> Node | None:
        if self.peek().kind is Kind.EOF:
            return None
        node = self.parse_or()
        tok = self.peek()
        if tok.kind is not Kind.EOF:
            if tok.kind is Kind.OP and tok.value == ")":
                raise self.fail("unbalanced ')'", tok.pos)
            raise self.fail(f"unexpected {tok.describe()}", tok.pos)
        self.condition(node, "a selector")
        return node

    def parse_or(self) -> Node:
        return self._logic("OR", self.parse_and)

    def parse_and(self) -> Node:
        return self._logic("AND", self.parse_not)

    def _logic(self, op: str, parse_operand: Callable[[], Node]) -> Node:
        first = parse_operand()
        if not self.at_keyword(op):
            return first
        operands: list[Node] = []
        self._add_operand(operands, op, self.condition(first, f"operand of {op}"))
        while self.at_keyword(op):
            tok = self.advance()
            if len(operands) >= MAX_OPERANDS:
                raise self.fail(f"selector joins more than {MAX_OPERANDS} terms with {op}", tok.pos)
            nxt = parse_operand()
            self._add_operand(operands, op, self.condition(nxt, f"operand of {op}"))
        return self.finish(Logic(first.pos, op, operands), VKind.BOOL)

    @staticmethod
    def _add_operand(operands: list[Node], op: str, node: Node) -> None:
        if isinstance(node, Logic) and node.op == op:
            operands.extend(node.operands)  # (a AND b) AND c == a AND b AND c
        else:
            operands.append(node)

    def parse_not(self) -> Node:
        if self.at_keyword("NOT"):
            tok = self.advance()
            self.enter()
            operand = self.parse_not()
            self.leave()
            return self.finish(Not(tok.pos, self.condition(operand, "operand of NOT")), VKind.BOOL)
        return self.parse_predicate()

    def parse_predicate(self) -> Node:
        left = self.parse_additive()
        tok = self.peek()
        if tok.kind is Kind.OP and tok.value in _COMPARISON_OPS:
            self.advance()
            right = self.parse_additive()
            return self._comparison(tok, left, right)
        if tok.kind is not Kind.KEYWORD:
            return left
        word = tok.value
        negated = False
        if word == "NOT":
            following = self.peek(1)
            if not (
                following.kind is Kind.KEYWORD and following.value in ("BETWEEN", "LIKE", "IN")
            ):
                raise self.fail(
                    f"expected BETWEEN, LIKE or IN after NOT, found {following.describe()}",
                    following.pos,
                )
            self.advance()
            negated = True
            word = following.value
        if word == "BETWEEN":
            self.advance()
            return self._between(left, negated)
        if word == "LIKE":
            self.advance()
            return self._like(left, negated)
        if word == "IN":
            self.advance()
            return self._in(left, negated)
        if word == "IS":
            self.advance()
            is_not = False
            if self.at_keyword("NOT"):
                self.advance()
                is_not = True
            self.expect_keyword("NULL", "after IS" + (" NOT" if is_not else ""))
            self.require(left, _SCALAR, "operand of IS NULL")
            return self.finish(IsNull(left.pos, left, is_not), VKind.BOOL)
        return left

    def _comparison(self, tok: Token, left: Node, right: Node) -> Node:
        op = str(tok.value)
        if op in _ORDERING_OPS:
            for side in (left, right):
                self.require(side, VKind.NUM, f"operand of '{op}'")
        else:
            for side in (left, right):
                self.require(side, _SCALAR, f"operand of '{op}'")
        return self.finish(Compare(left.pos, op, left, right), VKind.BOOL)

    def _between(self, operand: Node, negated: bool) -> Node:
        low = self.parse_additive()
        self.expect_keyword("AND", "between the bounds of BETWEEN")
        high = self.parse_additive()
        self.require(operand, VKind.NUM, "operand of BETWEEN")
        self.require(low, VKind.NUM, "lower bound of BETWEEN")
        self.require(high, VKind.NUM, "upper bound of BETWEEN")
        return self.finish(Between(operand.pos, operand, low, high, negated), VKind.BOOL)

    def _like(self, operand: Node, negated: bool) -> Node:
        self.require(operand, VKind.STR, "operand of LIKE")
        pattern = self.expect_string("as the LIKE pattern")
        escape: str | None = None
        if self.at_keyword("ESCAPE"):
            self.advance()
            esc_tok = self.expect_string("after ESCAPE")
            escape = str(esc_tok.value)
            if len(escape) != 1:
                raise self.fail("the ESCAPE string must be exactly one character", esc_tok.pos)
        node = Like(operand.pos, operand, str(pattern.value), escape, negated)
        return self.finish(node, VKind.BOOL)

    def _in(self, operand: Node, negated: bool) -> Node:
        self.require(operand, VKind.STR, "operand of IN")
        self.expect_op("(", "after IN")
        values = [str(self.expect_string("in the IN list").value)]
        while self.at_op(","):
            self.advance()
            values.append(str(self.expect_string("in the IN list").value))
        self.expect_op(")", "to close the IN list")
        return self.finish(InList(operand.pos, operand, tuple(values), negated), VKind.BOOL)

    def parse_additive(self) -> Node:
        left = self.parse_multiplicative()
        while self.peek().kind is Kind.OP and self.peek().value in ("+", "-"):
            tok = self.advance()
            right = self.parse_multiplicative()
            left = self._arith(tok, left, right)
        return left

    def parse_multiplicative(self) -> Node:
        left = self.parse_unary()
        while self.peek().kind is Kind.OP and self.peek().value in ("*", "/", "%"):
            tok = self.advance()
            right = self.parse_unary()
            left = self._arith(tok, left, right)
        return left

    def _arith(self, tok: Token, left: Node, right: Node) -> Node:
        op = str(tok.value)
        if op == "+":
            for side in (left, right):
                self.require(side, VKind.NUM | VKind.STR, "operand of '+'")
            kinds = VKind(0)
            if left.kinds & right.kinds & VKind.NUM:
                kinds |= VKind.NUM
            if left.kinds & right.kinds & VKind.STR:
                kinds |= VKind.STR
            if not kinds:
                raise self.fail(
                    "'+' adds two numbers or concatenates two strings, not "
                    f"{describe_kinds(left.kinds)} and {describe_kinds(right.kinds)}",
                    tok.pos,
                )
        else:
            for side in (left, right):
                self.require(side, VKind.NUM, f"operand of '{op}'")
            kinds = VKind.NUM
        return self.finish(Arith(left.pos, op, left, right), kinds)

    def parse_unary(self) -> Node:
        tok = self.peek()
        if tok.kind is Kind.OP and tok.value in ("+", "-"):
            self.advance()
            nxt = self.peek()
            if tok.value == "-" and nxt.kind is Kind.EXACT and nxt.negatable_only:
                self.advance()
                return self.finish(Literal(tok.pos, -LONG_MIN_MAGNITUDE), VKind.NUM)
            self.enter()
            operand = self.parse_unary()
            self.leave()
            self.require(operand, VKind.NUM, f"operand of unary '{tok.value}'")
            if isinstance(operand, Literal) and _is_number(operand.value):
                value = cast(int | float, operand.value)
                if tok.value == "-":
                    # keeps the Java type; -(Long.MIN_VALUE) wraps, as in Java
                    value = cast(int | float, runtime.neg(value))
                return self.finish(Literal(tok.pos, value), VKind.NUM)
            return self.finish(Unary(tok.pos, str(tok.value), operand), VKind.NUM)
        return self.parse_primary()

    def parse_primary(self) -> Node:
        tok = self.peek()
        kind = tok.kind
        if kind is Kind.STRING:
            self.advance()
            return self.finish(Literal(tok.pos, str(tok.value)), VKind.STR)
        if kind is Kind.EXACT or kind is Kind.APPROX:
            if tok.negatable_only:
                raise self.fail("exact numeric literal does not fit in a long", tok.pos)
            self.advance()
            return self.finish(Literal(tok.pos, cast(int | float, tok.value)), VKind.NUM)
        if kind is Kind.KEYWORD:
            if tok.value in ("TRUE", "FALSE"):
                self.advance()
                return self.finish(Literal(tok.pos, tok.value == "TRUE"), VKind.BOOL)
            if tok.value == "NULL":
                raise self.fail("NULL can only be used in IS NULL / IS NOT NULL", tok.pos)
            raise self.fail(
                f"expected an expression, found {tok.describe()} "
                "(reserved words cannot be identifiers)",
                tok.pos,
            )
        if kind is Kind.IDENT:
            self.advance()
            if self.at_op("("):
                return self.parse_call(tok)
            return self.finish(Ident(tok.pos, str(tok.value)), _SCALAR)
        if kind is Kind.OP and tok.value == "(":
            self.advance()
            self.enter()
            inner = self.parse_or()
            self.leave()
            self.expect_op(")", "to close the parenthesis")
            return inner
        if kind is Kind.EOF:
            raise self.fail("unexpected end of selector, expected an expression", tok.pos)
        raise self.fail(f"expected an expression, found {tok.describe()}", tok.pos)

    def parse_call(self, name_tok: Token) -> Node:
        name = str(name_tok.value)
        spec = FUNCTIONS.get(name.upper())
        if spec is None:
            raise self.fail(f"unknown function {name}", name_tok.pos)
        self.advance()  # '('
        self.enter()
        args: list[Node] = []
        if not self.at_op(")"):
            args.append(self.parse_or())
            while self.at_op(","):
                self.advance()
                args.append(self.parse_or())
        self.expect_op(")", f"to close the arguments of {spec.name}")
        self.leave()
        count = len(args)
        if count < spec.min_args or (spec.max_args is not None and count > spec.max_args):
            if spec.max_args is None:
                expected = f"at least {spec.min_args}"
            elif spec.min_args == spec.max_args:
                expected = str(spec.min_args)
            else:
                expected = f"{spec.min_args} to {spec.max_args}"
            raise self.fail(f"{spec.name} takes {expected} arguments, got {count}", name_tok.pos)
        for index, arg in enumerate(args):
            allowed = spec.allowed(index)
            role = f"argument {index + 1} of {spec.name}"
            if allowed == VKind.LIST:
                if arg.kinds != VKind.LIST:
                    raise self.fail(
                        f"{role} must be a list (SPLIT or MAKELIST), "
                        f"not {describe_kinds(arg.kinds)}",
                        arg.pos,
                    )
            else:
                self.require(arg, allowed, role)
        node = Call(name_tok.pos, spec.name, args, [a.pos for a in args])
        return self.finish(node, spec.result)
