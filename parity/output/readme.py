"""docs/results.md's results table, made from shipped results files: per machine class and row kind x replicas x number
format, each framework's fastest row, each other framework's fastest over the reference's with its 95% interval, and the
parity verdict; then, per file, the machine and the command that made it.

A file's machine class is the name of its folder (`docs/results/zen4/cpu-default.json`: `zen4`); the folder's
README.md says what that class is. docs/results.md holds the block between BEGIN and END; BEGIN names the files
(relative to the repository's root), so `tests/test_readme.py` can make the block again and fail where the two
differ. The README's compact grid is parity.output.grid's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from parity.common import frameworks
from parity.common.safe import from_comment, text
from parity.judging import summary
from parity.output.cells import md_table, time_cell
from parity.output.files import ResultsError, load_results

COMMAND = "python -m parity.report --readme"
BEGIN = "<!-- results table: {command} {files} -->"
END = "<!-- end of results table -->"
_BEGIN = re.compile(r"<!-- results table: python -m parity\.report --readme (?P<files>[^>]*?) -->")


def machine_class(path: Path) -> str:
    """The class a results file stands for: its folder's name."""
    return path.parent.name


def _ratio_cell(num: dict, den: dict) -> str:
    q = summary.ratio(num, den)
    if q.low is None:
        return f"{q.ratio:.2f}x (" + ("no raw times" if not num.get("times_s") else f"{min(q.calls)} calls") + ")"
    return f"{q.ratio:.2f}x ({q.low:.2f}-{q.high:.2f})" + (", no difference" if q.contains_one() else "")


def _lines(cls: str, doc: dict, fws: list[str]) -> list[tuple[str, ...]]:
    """One line per group of one file, in the columns of `fws` (every file's frameworks, in the table's order); a
    ratio divides by the group's reference, the first framework with a row there, named in the cell where that is
    not the first column's."""
    out = []
    for kind, n, dtype in summary.groups(doc["rows"]):
        b = summary.fastest_rows(doc["rows"], kind, n, dtype)
        ref = next(iter(b))
        said = "" if ref == fws[0] else f", over {frameworks.short(ref)}"
        cells = [f"{b[fw]['variant']} {time_cell(b[fw]['median_s'])}" if fw in b else "-" for fw in fws]
        ratios = [_ratio_cell(b[fw], b[ref]) + said if fw in b and fw != ref else "-" for fw in fws[1:]]
        versus = frameworks.ratios(fws)[len(fws) - 1 :]  # the pairs after each-over-the-reference
        ratios += [_ratio_cell(b[a], b[d]) if a in b and d in b else "-" for a, d in versus]
        out.append((cls, kind, str(n), dtype, *cells, *ratios, summary.verdict(doc, kind, n, dtype)))
    return out


def _command(doc: dict) -> str:
    """The run's command as recorded, without where it wrote its files."""
    argv, out = list(doc["env"].get("argv") or []), []
    while argv:
        a = argv.pop(0)
        if a == "--out" and argv:
            argv.pop(0)
        elif not a.startswith("--out="):
            out.append(a)
    return " ".join(out)


def _source(cls: str, path: Path, doc: dict) -> tuple[str, ...]:
    """The file's line in the sources table: where it is, the command and commit, the host, what passed, versions."""
    env, rows = doc["env"], doc["rows"]
    checks = doc.get("checks") or []
    judged = [c for c in checks if c.get("passed") is not None]
    workers = env.get("frameworks") or {}
    versions = "; ".join(
        f"{frameworks.short(k)}: " + ", ".join(f"{n} {v}" for n, v in workers[k].get("versions", {}).items())
        for k in summary.frameworks_in(rows)
        if k in workers
    )
    passed = f"{sum(c['passed'] for c in judged)} of {len(checks)} passed"
    if len(judged) < len(checks):
        passed += f", {len(checks) - len(judged)} not judged"
    return (
        cls,
        path.as_posix(),
        f"{_command(doc)} at {env.get('git_commit', '?')}",
        f"{env.get('host_cpu', '?')}, {env.get('host_cores', '?')} cores",
        f"{sum(r['verified'] for r in rows)} of {len(rows)}",
        passed,
        versions,
    )


def class_files(paths: list[Path]) -> list[tuple[str, Path, dict]]:
    """(machine class, path, results) for each of `paths`, one file per class. Raises ResultsError for a file that
    is not a results file, one in no folder, or two files of one machine class."""
    bare = [p for p in paths if not machine_class(p)]
    if bare:
        raise ResultsError(f"{bare[0]}: in no folder; give each file in a folder named after its machine class")
    docs = [(machine_class(p), p, load_results(p)) for p in paths]
    classes = [c for c, _, _ in docs]
    if len(set(classes)) < len(classes):
        twice = sorted({c for c in classes if classes.count(c) > 1})
        raise ResultsError(f"two files of one machine class (folder) {', '.join(twice)}: give one file per class")
    return docs


SOURCES = ("machine", "file", "command at commit", "host", "rows verified", "checks", "versions")


def block(paths: list[Path]) -> str:
    """docs/results.md's results block for `paths` (as given, relative to the repository's root), markers
    included. Raises ResultsError for a file that is not a results file, one in no folder, or two files of one
    machine class."""
    docs = class_files(paths)
    fws = frameworks.ordered(r["framework"] for _, _, d in docs for r in d["rows"])
    head = ("machine", "kind", "replicas", "format", *(f"{frameworks.short(fw)} fastest" for fw in fws))
    pairs = frameworks.ratios(fws)
    head += (*(f"{frameworks.over(a, d)} (95% CI)" for a, d in pairs), "parity")
    body = [line for cls, _, doc in docs for line in _lines(cls, doc, fws)]
    said = ", ".join(f"{frameworks.over(fw, fws[0])}" for fw in fws[1:])
    also = "".join(
        f"; {frameworks.over(a, d)}: over the fastest {frameworks.short(d)} row's" for a, d in pairs[len(fws) - 1 :]
    )
    how = (
        f"{said}: the fastest row's median time over the fastest {frameworks.short(fws[0])} row's (below 1: faster "
        f"than {frameworks.short(fws[0])}){also}, with a 95% bootstrap interval paired by interleaving round "
        "([statistics.md](statistics.md)); an interval that holds 1 is no difference measurable there. "
        if fws[1:]
        else ""
    )
    return "\n".join(
        [
            BEGIN.format(command=COMMAND, files=" ".join(text(p.as_posix(), "comment") for p in paths)),
            md_table(head, body),
            "",
            how
            + "Each cell names the variant that was fastest; `parity` is the parity checks' verdict for that group.",
            "",
            md_table(SOURCES, [_source(cls, p, doc) for cls, p, doc in docs]),
            END,
        ]
    )


def marked(page: str, begin: re.Pattern, end: str, what: str) -> tuple[list[Path], str]:
    """The files a page's generated block was made from (read off its `begin` marker, a pattern with a 'files'
    group) and the block itself, markers included. Raises ValueError where the page holds no such block."""
    m = begin.search(page)
    if not m or end not in page[m.end() :]:
        raise ValueError(f"no {what} between its markers")
    block_text = page[m.start() : page.index(end, m.start()) + len(end)]
    return [Path(from_comment(f)) for f in m.group("files").split()], block_text


def files_named(text: str) -> list[Path]:
    """The files a page's results block was made from. Raises ValueError where the text holds no block."""
    return marked(text, _BEGIN, END, f"results block ('{COMMAND} FILES')")[0]


def shown(text: str) -> str:
    """The results block a page holds, markers included. Raises ValueError where it holds none."""
    return marked(text, _BEGIN, END, f"results block ('{COMMAND} FILES')")[1]


def readme_main(args, make=block, flag: str = "--readme") -> int:
    """`python -m parity.report --readme FILES` (or `--grid`, with parity.output.grid.grid as `make`): print the
    block; a bad file is one line and exit 2."""
    others = [
        f
        for f, v in (
            ("--baseline", args.baseline),
            ("--workload", args.workload),
            ("--kind", args.kind),
            ("--out", args.out),
        )
        if v
    ]
    if others or args.no_article or (args.readme and args.grid):
        said = ", ".join(others or ["--no-article" if args.no_article else "--readme and --grid at once"])
        print(f"error: {flag} takes only results files, not {said}", file=sys.stderr)
        return 2
    try:
        print(make(args.files))
    except (ResultsError, OSError) as e:
        print(text(f"error: {e}"), file=sys.stderr)
        return 2
    return 0
