"""mkdocs hook of the documentation site (mkdocs.yml: ``hooks:``). At build time it

- writes the command-line reference from the argparse parser itself (``polyvse_app.cli.build_parser()``): one page
  per top-level command under ``reference/cli/``, a section per subcommand, so a new command or option is in the
  site without anyone copying it;
- writes the Python API reference: one page per public module found by walking ``src/polyvse`` (modules and
  packages whose name starts with ``_`` are skipped), each a mkdocstrings ``:::`` block, so a module that moves
  moves its page with it;
- mirrors the records (``results/`` and ``benchmarks/results/``, outside ``docs/``; and ``configs/``) into the site
  under ``records/``, with a listing page per folder, and rewrites every Markdown link that points at a record (relative
  to the page, as it works on GitHub, or relative to the repository root, as README's generated blocks write it)
  to the mirrored copy. A link to a record that does not exist is a warning, which ``mkdocs build --strict`` turns
  into a failed build; so is a link to any other file outside ``docs/``.

Nav entries ``reference/cli/index.md`` and ``reference/api/index.md`` in mkdocs.yml are expanded into the
generated pages.
"""

from __future__ import annotations

import argparse
import html
import logging
import os
import posixpath
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.polyvse_docs")

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
# repository folders mirrored into the site, below RECORDS: the records, and the configs the guides and method pages
# point at (served as files, never rendered)
RECORD_DIRS = ("results", "benchmarks/results", "configs")
RECORDS = "records"
RECORD_SUFFIXES = {".json", ".jsonl", ".md", ".csv", ".log", ".txt", ".tsv", ".yaml"}
CLI_DIR = "reference/cli"
API_DIR = "reference/api"
API_PACKAGES = ("polyvse",)

_LINK = re.compile(r"(?P<pre>!?\[[^\]\n]*\]\()(?P<target><[^>\n]+>|[^)\s]+)(?P<title>\s+\"[^\"\n]*\")?\)")
_REF_DEF = re.compile(r"^(?P<pre> {0,3}\[[^\]\n]+\]:\s*)(?P<target>\S+)", re.M)
_FENCE = re.compile(r"^(?P<fence> {0,3}(```+|~~~+)).*?^(?P=fence)\s*$", re.M | re.S)


class _StaticFile(File):
    """A mirrored record: copied as it is, never rendered as a page (records include .md files)."""

    def is_documentation_page(self) -> bool:
        return False

    def is_static_page(self) -> bool:
        return False


# --------------------------------------------------------------------------------------------- CLI reference


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of ``parser``, aliases folded into their command."""
    out, seen = [], set()
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: (a.help or "") for a in action._choices_actions}
        for name, sub in action.choices.items():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            out.append((name, helps.get(name, ""), sub))
    return out


def command_paths(parser: argparse.ArgumentParser | None = None, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the parser (``("zoo", "run")``, ...), depth first; tests/test_docs.py uses it too."""
    if parser is None:
        parser = _build_parser()
    out = []
    for name, _, sub in _subcommands(parser):
        out.append(prefix + (name,))
        out.extend(command_paths(sub, prefix + (name,)))
    return out


def _build_parser() -> argparse.ArgumentParser:
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    from polyvse_app.cli import build_parser

    return build_parser()


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog=parser.prog, width=80, max_help_position=32)


def _md_text(text: str) -> str:
    """argparse help as Markdown: collapse its line breaks, escape what Markdown would read as markup (backticks
    stay: the help texts write commands and file names in them)."""
    text = " ".join(text.split())
    parts = re.split(r"(`[^`]*`)", text)
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = re.sub(
            r"([\\*_\[\]|<>&])",
            lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(m.group(1), "\\" + m.group(1)),
            parts[i],
        )
    return "".join(parts)


def _option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    fmt = _formatter(parser)
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        if action.option_strings:
            if action.nargs == 0:
                name = ", ".join(action.option_strings)
            else:
                metavar = fmt._format_args(action, action.dest.upper())
                name = ", ".join(f"{s} {metavar}" for s in action.option_strings)
        else:
            name = fmt._metavar_formatter(action, action.dest)(1)[0]
        help_text = fmt._expand_help(action) if action.help else ""
        if action.choices is not None and not isinstance(action.choices, dict) and "{" not in name:
            choices = ", ".join(str(c) for c in action.choices)
            help_text = f"{help_text} (one of: {choices})" if help_text else f"one of: {choices}"
        rows.append((name, help_text))
    return rows


def _usage(parser: argparse.ArgumentParser) -> str:
    fmt = _formatter(parser)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return fmt.format_help().strip()


def _command_section(path: tuple[str, ...], summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    title = "polyvse " + " ".join(path)
    lines = [f"{'#' * level} `{title}`", ""]
    if summary:
        lines += [_md_text(summary), ""]
    if parser.description and parser.description.strip() != summary.strip():
        lines += [_md_text(parser.description), ""]
    lines += ["```text", _usage(parser), "```", ""]
    rows = _option_rows(parser)
    if rows:
        lines += ["| argument | what it does |", "|---|---|"]
        lines += [f"| `{name}` | {_md_text(text)} |" for name, text in rows]
        lines.append("")
    if parser.epilog:
        lines += [_md_text(parser.epilog), ""]
    subs = _subcommands(parser)
    if subs:
        lines += ["Subcommands: " + ", ".join(f"[`{n}`](#{_anchor(path + (n,))})" for n, _, _ in subs) + ".", ""]
        for name, help_text, sub in subs:
            lines += _command_section(path + (name,), help_text, sub, min(level + 1, 6))
    return lines


def _anchor(path: tuple[str, ...]) -> str:
    return "polyvse-" + "-".join(path)


def cli_pages() -> dict[str, str]:
    """{page path: Markdown} of the command-line reference."""
    parser = _build_parser()
    commands = _subcommands(parser)
    index = [
        "# Command line",
        "",
        "Generated at build time from `polyvse`'s own argument parser (`polyvse_app.cli.build_parser()`), so every",
        "command and option below is the one the installed version accepts; `polyvse COMMAND --help` prints the same.",
        "",
        "```text",
        _usage(parser),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    pages = {}
    for name, help_text, sub in commands:
        index.append(f"| [`polyvse {name}`]({_cli_page(name)}) | {_md_text(help_text or sub.description or '')} |")
        body = _command_section((name,), help_text, sub, 1)
        # the page's own title carries the anchor the index and the subcommand lists link to
        body[0] = f"# `polyvse {name}` {{ #{_anchor((name,))} }}"
        pages[f"{CLI_DIR}/{_cli_page(name)}"] = "\n".join(_with_anchors(body)) + "\n"
    pages[f"{CLI_DIR}/index.md"] = "\n".join(index) + "\n"
    return pages


def _cli_page(command: str) -> str:
    # "polyvse-index.md", not "index.md": the command `polyvse index` must not become the section's index page
    return f"polyvse-{command}.md"


def _with_anchors(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = re.fullmatch(r"(#{2,6}) `polyvse ([^`]+)`", line)
        if m:
            line = f"{line} {{ #{_anchor(tuple(m.group(2).split()))} }}"
        out.append(line)
    return out


# ---------------------------------------------------------------------------------------- Python API reference


def api_modules() -> list[str]:
    """Dotted names of the public modules and packages under src/ of API_PACKAGES, sorted, packages first."""
    names = []
    for package in API_PACKAGES:
        root = SRC / package
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(SRC).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if any(p.startswith("_") for p in parts) or "__pycache__" in path.parts:
                continue
            if not (path.parent / "__init__.py").exists():
                continue  # not importable as part of the package
            names.append(".".join(parts))
    return sorted(set(names))


def _api_page_path(module: str) -> str:
    # flat, by dotted name: a module named "index" (polyvse.index) cannot turn into a folder's index page
    return f"{API_DIR}/{module}.md"


def api_pages() -> dict[str, str]:
    modules = api_modules()
    pages = {}
    for module in modules:
        pages[_api_page_path(module)] = f"# `{module}`\n\n::: {module}\n"
    top = [
        "# Python API",
        "",
        "Generated at build time from the docstrings of every public module under `src/polyvse` (mkdocstrings); the",
        "modules are found by walking the source, so a module that moves takes its page along.",
        "",
        "The entry point is `polyvse.load(path)`: it opens a checkpoint folder as a model with `encode_text`,",
        "`encode_image`, `similarity` and `retrieval_scores` (the Search guide shows it at work).",
        "",
        "::: polyvse",
        "    options:",
        "      show_root_heading: false",
        "      show_submodules: false",
        "",
        "## Modules",
        "",
        "| module | |",
        "|---|---|",
    ]
    for module in modules:
        if module in API_PACKAGES:
            continue
        rel = posixpath.relpath(_api_page_path(module), API_DIR)
        top.append(f"| [`{module}`]({rel}) | {_first_line(module)} |")
    pages[f"{API_DIR}/index.md"] = "\n".join(top) + "\n"
    for package in API_PACKAGES:
        pages.pop(_api_page_path(package), None)
    return pages


def _first_line(module: str) -> str:
    """The first sentence of a module's docstring, read statically (no import)."""
    import ast

    path = SRC / module.replace(".", "/")
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except (SyntaxError, OSError):
        return ""
    first = _rewrite_roles(" ".join(doc.strip().split("\n\n")[0].split()))
    m = re.match(r"(.+?[.:;])(\s|$)", first)
    first = m.group(1) if m else first
    if len(first) > 160:
        first = first[:157].rsplit(" ", 1)[0] + " …"
    return _md_text(first)


def _rewrite_roles(text: str) -> str:
    """Sphinx roles as code spans, as the API pages show them (docs/hooks/griffe_docstring_roles.py)."""
    hooks = str(REPO / "docs" / "hooks")
    if hooks not in sys.path:
        sys.path.insert(0, hooks)
    from griffe_docstring_roles import rewrite_roles

    return rewrite_roles(text)


def _api_nav(modules: list[str]) -> list:
    """Nested nav: a section per package (its own page first), a leaf per module."""
    tree: dict = {}
    for module in modules:
        node = tree
        for part in module.split(".")[1:]:
            node = node.setdefault(part, {})
    pkgs = set(API_PACKAGES)

    def build(prefix: str, node: dict) -> list:
        items = []
        for name in sorted(node):
            dotted = f"{prefix}.{name}"
            if node[name] or _is_package(dotted):
                items.append({name: [_api_page_path(dotted)] + build(dotted, node[name])})
            else:
                items.append({name: _api_page_path(dotted)})
        return items

    nav = [f"{API_DIR}/index.md"]
    for package in sorted(pkgs):
        nav += build(package, tree)
    return nav


def _is_package(dotted: str) -> bool:
    return (SRC / dotted.replace(".", "/") / "__init__.py").exists()


# ------------------------------------------------------------------------------------------------- records


def record_files() -> list[Path]:
    out = []
    for folder in RECORD_DIRS:
        root = REPO / folder
        if root.is_dir():
            out += [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in RECORD_SUFFIXES]
    return out


def _listing(rel_dir: str, entries: list[tuple[str, bool]]) -> str:
    items = "\n".join(
        f'<li><a href="{html.escape(n)}{"/index.html" if d else ""}">{html.escape(n)}{"/" if d else ""}</a></li>'
        for n, d in entries
    )
    return (
        '<!doctype html>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(rel_dir)}/</title>\n<h1>{html.escape(rel_dir)}/</h1>\n"
        "<p>A record folder of the repository, mirrored into the documentation site.</p>\n"
        f'<ul>\n<li><a href="../index.html">../</a></li>\n{items}\n</ul>\n'
    )


def _record_dir_files(config, files: list[Path]) -> list[File]:
    children: dict[str, set[tuple[str, bool]]] = {}
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        parts = rel.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            children.setdefault(parent, set()).add((parts[i], i < len(parts) - 1))
    out = []
    for rel_dir, entries in sorted(children.items()):
        if not any(rel_dir == d or rel_dir.startswith(d + "/") for d in RECORD_DIRS):
            continue  # "benchmarks" itself is not mirrored
        f = _StaticFile.generated(config, f"{RECORDS}/{rel_dir}/index.html", content=_listing(rel_dir, sorted(entries)))
        out.append(f)
    return out


# ------------------------------------------------------------------------------------------------- hooks

_generated_nav: dict[str, list] = {}


def on_files(files: Files, config, **kwargs) -> Files:
    cli = cli_pages()
    api = api_pages()
    for path, text in {**cli, **api}.items():
        files.append(File.generated(config, path, content=text))
    records = record_files()
    for path in records:
        rel = path.relative_to(REPO).as_posix()
        files.append(_StaticFile.generated(config, f"{RECORDS}/{rel}", abs_src_path=str(path)))
    for f in _record_dir_files(config, records):
        files.append(f)
    cli_nav = [f"{CLI_DIR}/index.md"] + [
        {p.rsplit("/", 1)[1][:-3].replace("-", " ", 1): p} for p in sorted(cli) if not p.endswith("/index.md")
    ]
    _generated_nav[f"{CLI_DIR}/index.md"] = cli_nav
    _generated_nav[f"{API_DIR}/index.md"] = _api_nav(api_modules())
    config.nav = _expand_nav(config.nav)
    return files


def _expand_nav(nav):
    """Replace a leaf ``Title: reference/cli/index.md`` (or api) with a section of the generated pages."""
    if isinstance(nav, list):
        return [_expand_nav(item) for item in nav]
    if isinstance(nav, dict):
        out = {}
        for title, value in nav.items():
            if isinstance(value, str) and value in _generated_nav:
                out[title] = _generated_nav[value]
            else:
                out[title] = _expand_nav(value)
        return out
    return nav


def _rewrite_target(target: str, page_src: str, files: Files) -> str | None:
    """The site-relative replacement of a link target that points outside docs/, or None to leave it alone."""
    bare = target[1:-1] if target.startswith("<") else target
    if re.match(r"^[a-z][a-z0-9+.-]*:", bare, re.I) or bare.startswith(("#", "/")):
        return None
    path, sep, anchor = bare.partition("#")
    if not path:
        return None
    page_dir = posixpath.dirname(page_src)
    in_docs = posixpath.normpath(posixpath.join(page_dir, path))
    if not in_docs.startswith("../") and files.get_file_from_path(in_docs.rstrip("/")) is not None:
        return None  # a page or file of the site: mkdocs checks it
    candidates = [posixpath.normpath(posixpath.join("docs", page_dir, path))]  # relative to the page, in the repo
    candidates.append(posixpath.normpath(path))  # relative to the repository root (README's generated blocks)
    for repo_rel in candidates:
        if repo_rel.startswith("../"):
            continue
        if repo_rel.startswith("docs/"):
            site_rel = repo_rel[len("docs/") :]
            if files.get_file_from_path(site_rel) is not None:
                return posixpath.relpath(site_rel, page_dir or ".") + sep + anchor
            continue
        if not any(repo_rel == d or repo_rel.startswith(d + "/") for d in RECORD_DIRS):
            continue
        full = REPO / repo_rel
        if full.is_dir():
            site_rel = f"{RECORDS}/{repo_rel}/index.html"
        elif full.is_file():
            site_rel = f"{RECORDS}/{repo_rel}"
        else:
            continue
        if files.get_file_from_path(site_rel) is None:
            log.warning(
                "%s: link to %s, a record the site does not mirror (suffix not in %s)",
                page_src,
                bare,
                sorted(RECORD_SUFFIXES),
            )
            return None
        return posixpath.relpath(site_rel, page_dir or ".") + sep + anchor
    if in_docs.startswith("../") or any(c.startswith(tuple(d + "/" for d in RECORD_DIRS)) for c in candidates):
        log.warning(
            "%s: link to %s, which is neither a page of the site nor a record that exists%s",
            page_src,
            bare,
            _archived_hint(candidates),
        )
    return None


def _archived_hint(candidates: list[str]) -> str:
    """ ", now at X" when the record was moved into its folder's archive/ (superseded records are kept there)."""
    for repo_rel in candidates:
        for d in RECORD_DIRS:
            if repo_rel.startswith(d + "/"):
                moved = f"{d}/archive/{repo_rel[len(d) + 1 :]}"
                if (REPO / moved).exists():
                    return f" (moved to {moved}: link there, and say it is history)"
    return ""


def on_page_markdown(markdown: str, page, config, files: Files, **kwargs) -> str:
    src = page.file.src_uri
    fences = [(m.start(), m.end()) for m in _FENCE.finditer(markdown)]

    def outside_fences(pos: int) -> bool:
        return not any(a <= pos < b for a, b in fences)

    def link(m: re.Match) -> str:
        if not outside_fences(m.start()):
            return m.group(0)
        new = _rewrite_target(m.group("target"), src, files)
        if new is None:
            return m.group(0)
        return f"{m.group('pre')}{new}{m.group('title') or ''})"

    def ref(m: re.Match) -> str:
        if not outside_fences(m.start()):
            return m.group(0)
        new = _rewrite_target(m.group("target"), src, files)
        return m.group(0) if new is None else m.group("pre") + new

    markdown = _LINK.sub(link, markdown)
    return _REF_DEF.sub(ref, markdown)


def on_config(config, **kwargs):
    # mkdocstrings reads the source statically from src/ (paths in mkdocs.yml); the CLI reference imports it
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    os.environ.setdefault("POLYVSE_DOCS_BUILD", "1")
    return config
