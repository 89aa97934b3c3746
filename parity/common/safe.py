"""The one sanitiser of text that came from a results file or a worker, before a terminal, Markdown, CSV, a chart
or a web page shows it: a results file is untrusted input (a merge of files from other machines), and its strings
must not drive the terminal, forge a table line, leave a Markdown cell or fence, run as a spreadsheet formula, or
make markup or script in results.html.

- every medium: control and format characters (ESC, BEL, a newline, a bidirectional override, a zero-width
  character) are written as escapes (`\\x1b`, `\\n`, `\\u202e`), so a string is always one visible line;
- markdown: also `\\`, `|`, a backtick, `[`, `]`, `<` and `&` escaped, so a cell stays a cell and no HTML, link
  or code span is made (rendered, it reads as the plain text);
- code: inside a Markdown code span, a backtick becomes `'` (a span has no escapes);
- chart: also `$` escaped, so matplotlib never parses a label as mathtext;
- html: also `&`, `<`, `>`, `"` and `'` as character references (html.escape, quote=True), so a string is text
  in an element or a quoted attribute of results.html and never markup or script;
- csv: also a leading `=`, `+`, `-`, `@` (a formula to a spreadsheet) behind a `'`, as OWASP advises;
- comment: inside an HTML comment that is read back (the README's results marker): every control, format and
  space character, `%`, `<` and `>` percent-encoded instead (UTF-8, as in a URL), so a string can neither close
  the comment nor split its line nor its list of words, and `unquote` gives it back exactly;
- `limit`: at most that many characters shown, the rest said as cut.

Lengths are bounded where files are read (parity.output.loading, by MAX_TEXT below) and written (`bounded`).
"""

from __future__ import annotations

import html
import unicodedata
from urllib.parse import quote, unquote

MEDIA = ("terminal", "markdown", "code", "csv", "chart", "comment", "html")
MAX_TEXT = 65536  # the longest string a results file holds: a framework's whole error message fits
_UNSEEN = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}  # control, format, line/paragraph separators, unassigned
_MARKDOWN = {c: "\\" + c for c in "\\|`[]"} | {"<": "&lt;", "&": "&amp;"}
_FORMULA = ("=", "+", "-", "@")


def _escape(c: str) -> str:
    o = ord(c)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (
        f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"
    )


def text(value, medium: str = "terminal", limit: int | None = None) -> str:
    """`value` (any object; None is '') as one line of plain text safe to show in `medium` (MEDIA)."""
    if medium not in MEDIA:
        raise ValueError(f"medium {medium!r}: expected one of {', '.join(MEDIA)}")
    s = "" if value is None else str(value)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    if medium == "comment":
        return "".join(quote(c, safe="", errors="surrogateescape") if _hides(c) else c for c in s)
    if s.isprintable() and s.isascii():
        out = s
    else:
        out = "".join(_escape(c) if unicodedata.category(c) in _UNSEEN else c for c in s)
    if medium == "markdown":
        out = "".join(_MARKDOWN.get(c, c) for c in out)
    elif medium == "code":
        out = out.replace("`", "'")
    elif medium == "chart":
        out = out.replace("$", "\\$")
    elif medium == "html":
        out = html.escape(out, quote=True)
    elif medium == "csv" and out.startswith(_FORMULA):
        out = "'" + out
    return out


def _hides(c: str) -> bool:
    """Whether `c` must be encoded inside a comment that is read back: unseen, a space, or one of `%<>`."""
    return c in "%<>" or c.isspace() or unicodedata.category(c) in _UNSEEN


def from_comment(s: str) -> str:
    """A string as text(..., "comment") wrote it, given back."""
    return unquote(s, errors="surrogateescape")


def fence(body: str) -> str:
    """`body` in a Markdown code fence longer than any run of backticks it holds: nothing inside can close it."""
    run = longest = 0
    for c in body:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    f = "`" * max(3, longest + 1)
    return f"{f}\n{body}\n{f}\n"


def bounded(doc, limit: int = MAX_TEXT):
    """`doc` (JSON data) with every string longer than `limit` cut to `limit` characters, saying how many were cut:
    what a results file may hold (parity.output.files refuses longer ones)."""
    if isinstance(doc, str):
        if len(doc) <= limit:
            return doc
        tail = f"... ({len(doc) - limit} characters cut)"
        return doc[: limit - len(tail) - 20] + tail
    if isinstance(doc, dict):
        return {bounded(k, limit): bounded(v, limit) for k, v in doc.items()}
    if isinstance(doc, list):
        return [bounded(v, limit) for v in doc]
    return doc


def too_long(doc, limit: int = MAX_TEXT) -> str | None:
    """The first string in `doc` (JSON data: keys included) longer than `limit`, cut for a message, or None."""
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            if len(x) > limit:
                return x
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return None
