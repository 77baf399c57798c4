"""The documentation site (mkdocs.yml, docs/): `mkdocs build --strict` must pass without a single warning, the
command-line reference must list every command of `build_parser()`, the API reference every public module, and a
link to a record that does not exist must fail the build (docs/hooks/polyvse_docs.py). The pages speak to users:
no issue numbers, commit hashes, dates of the team's work or its machine-lending scheme outside the decisions log,
every "served as" agrees with the languages record, and the curated API page's signatures are the code's."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polyvse.evaluation.report import block_body, block_names, replace_block

REPO = Path(__file__).resolve().parents[1]
DOCS_TOOLS = ("mkdocs", "material", "mkdocstrings_handlers.python")


def _require_docs_tools() -> None:
    """The site's tests fail (never skip) without the tools that build it: a missing tool is a broken setup."""
    missing = []
    for name in DOCS_TOOLS:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        pytest.fail(
            f"the documentation tools are not installed ({', '.join(missing)}): run `make setup` "
            "(pip install -c constraints.txt -e '.[dev]'), then run the docs tests again"
        )


def test_the_docs_tools_are_installed():
    _require_docs_tools()


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    _require_docs_tools()
    out = tmp_path_factory.mktemp("site")
    proc = _mkdocs_build(REPO / "mkdocs.yml", out)
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert proc.returncode == 0 and not warnings, f"mkdocs build --strict failed:\n{log[-6000:]}"
    return out


def _command_paths(parser: argparse.ArgumentParser, prefix=()) -> list[tuple[str, ...]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append(prefix + (name,))
                out += _command_paths(sub, prefix + (name,))
    return out


def test_cli_reference_lists_every_command_and_option(site):
    from polyvse_app.cli import build_parser

    paths = _command_paths(build_parser())
    assert len(paths) > 20  # the walk reached the subcommands (zoo run, index build, ...)
    missing = []
    for path in paths:
        page = site / "reference" / "cli" / f"polyvse-{path[0]}" / "index.html"
        text = page.read_text(encoding="utf-8") if page.exists() else ""
        if f'id="polyvse-{"-".join(path)}"' not in text:
            missing.append(" ".join(path))
    assert not missing, f"the CLI reference lacks: {missing}"
    # and every option of one command, as its parser knows it
    search = (site / "reference" / "cli" / "polyvse-search" / "index.html").read_text(encoding="utf-8")
    for flag in ("--index", "--lang", "--image", "--similar-to", "--json", "--device"):
        assert flag in search


def test_api_reference_has_every_public_module(site):
    modules = []
    for path in (REPO / "src" / "polyvse").rglob("*.py"):
        parts = list(path.relative_to(REPO / "src").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if "__pycache__" in path.parts or any(p.startswith("_") for p in parts) or len(parts) == 1:
            continue
        modules.append(".".join(parts))
    assert "polyvse.model.torch_model" in modules
    missing = [m for m in modules if not (site / "reference" / "api" / m / "index.html").exists()]
    assert not missing, f"no API page for {missing}"
    load = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="polyvse.load"' in load  # the entry point, from its docstring


def test_records_are_mirrored_and_linked(site):
    record = site / "records" / "results" / "languages-model.json"
    assert record.exists()
    assert (site / "records" / "results" / "index.html").exists()  # a folder listing for folder links
    # a page's link to a record outside docs/ (../results/...) lands on the mirrored copy
    decisions = (site / "decisions" / "index.html").read_text(encoding="utf-8")
    assert 'href="../records/results/model-crosslingual.json"' in decisions


@pytest.mark.parametrize(
    "page, block", [("product-model.md", "product-model"), ("languages.md", "languages"), ("benchmarks.md", "bench")]
)
def test_result_pages_keep_their_generated_blocks(page, block):
    """`polyvse report` fills these blocks from the records; the pages must keep both markers."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    assert text.count(f"<!-- {block}:start -->") == 1 and text.count(f"<!-- {block}:end -->") == 1
    assert text.index(f"<!-- {block}:start -->") < text.index(f"<!-- {block}:end -->")


def test_a_link_to_a_missing_record_fails_the_build(tmp_path):
    _require_docs_tools()
    docs = tmp_path / "docs"
    (docs / "hooks").mkdir(parents=True)
    (docs / "hooks" / "polyvse_docs.py").write_text(
        (REPO / "docs" / "hooks" / "polyvse_docs.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (docs / "index.md").write_text(
        textwrap.dedent("""\
        # t

        [exists](../results/languages-model.json), [missing](../results/no-such-record.json)
    """),
        encoding="utf-8",
    )
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        textwrap.dedent(f"""\
        site_name: t
        docs_dir: {docs}
        exclude_docs: hooks/
        hooks: [{docs / "hooks" / "polyvse_docs.py"}]
        nav: [index.md]
    """),
        encoding="utf-8",
    )
    # the copied hook must find the repository it documents
    hook = docs / "hooks" / "polyvse_docs.py"
    hook.write_text(
        hook.read_text(encoding="utf-8").replace(
            "REPO = Path(__file__).resolve().parents[2]", f"REPO = Path({str(REPO)!r})"
        ),
        encoding="utf-8",
    )
    proc = _mkdocs_build(config, tmp_path / "site")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]
    assert "no-such-record.json" in log
    assert "languages-model.json" not in "".join(l for l in log.splitlines() if "WARNING" in l)
    page = tmp_path / "site" / "index.html"
    if page.exists():  # strict mode may stop before writing; when written, the good link points at the mirror
        assert "records/results/languages-model.json" in page.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------- the pages speak to their readers

_FENCE = re.compile(r"^ {0,3}(?P<f>```+|~~~+).*?^ {0,3}(?P=f)[ \t]*$", re.S | re.M)
_LINK_TARGET = re.compile(r"\]\((?:<[^>\n]*>|[^)\s]*)(?:\s+\"[^\"\n]*\")?\)")
_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_DATE = re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")
_ISSUE = re.compile(r"(?<![\w&/#])#[1-9]\d*\b|\bissues?\s+#?\d+\b", re.I)  # "#0" is a caption's index
_LENDING = re.compile(
    r"\bGPU windows?\b|\blent\b|\blending\b|\bdevice time\b|\bcalls? can carry\b|\b15-minute\b|\bfit the call\b"
    r"|\bdevice calls?\b|\bwarm calls?\b|\bunpack calls?\b",
    re.I,
)
# a generated block cites a record by its link, then that record's own provenance in parentheses (its run's date,
# commit and machine: "[`r.json`](r.json) (2026-11-28, commit 63db45dae380; AMD EPYC, 2 cores)"): that date and
# commit date the figure, they are not the team's history; issue numbers and lending words there still count
_RECORD_PROVENANCE = re.compile(
    r"\]\(\)(?: \((?:reconstructed provenance|an earlier build of the product model)\))* \((?:[^()\n]|\([^()\n]*\))*\)"
)
# a record's own name in inline code (`results/archive/test-polyvse-best-2026-11-27/`), as its link target would be
_RECORD_NAME = re.compile(r"`(?:results|benchmarks/results)/[^`\s]*`")
# the walkthrough's provenance header (scripts/service_walkthrough.py writes it: the run's commit and date)
_WALKTHROUGH = "service.md"
_WALKTHROUGH_HEADER = re.compile(r"\*\*How this page was made\.\*\*.*?(?=^## )", re.S | re.M)


def user_pages() -> list[Path]:
    """README and every page of the site a user reads as prose; the decisions log is the project's history, and
    docs/templates/ holds the walkthrough's template, not a page."""
    pages = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
    pages += sorted((REPO / "src" / "polyvse_train" / "configs").rglob("*.md"))  # shipped in the wheel
    return [p for p in pages if p.name != "decisions.md" and "templates" not in p.relative_to(REPO).parts]


def without_generated(text: str) -> str:
    """``text`` without its generated blocks (rendered from the records by `polyvse report`, which cite each
    record's date and commit as its provenance)."""
    for name in block_names(text):
        text = replace_block(text, name, "")
    return text


def user_prose(text: str, name: str = "") -> str:
    """What a reader reads, the authors' words and the generated blocks' alike: no code blocks (commands and their
    real output), link targets and records' names in inline code (record file names, URL anchors), the record
    provenance a generated block gives beside a record's link, nor the walkthrough's provenance header."""
    if name == _WALKTHROUGH:
        text = _WALKTHROUGH_HEADER.sub("", text)
    text = _RECORD_NAME.sub("``", _LINK_TARGET.sub("]()", _FENCE.sub("", text)))
    for block in block_names(text):
        body = _RECORD_PROVENANCE.sub(lambda m: _HASH.sub("", _DATE.sub("", m.group(0))), block_body(text, block))
        text = replace_block(text, block, body)
    return text


def lab_notebook_marks(text: str, name: str = "") -> list[str]:
    body = user_prose(text, name)
    found = []
    for line in body.splitlines():
        for label, rx in (
            ("commit hash", _HASH),
            ("date", _DATE),
            ("issue number", _ISSUE),
            ("machine-lending words", _LENDING),
        ):
            found += [f"{label} {m.group(0)!r} (in: {line.strip()[:100]})" for m in rx.finditer(line)]
    return found


def test_the_pages_carry_no_history_of_the_team():
    """Issue numbers, commit hashes, dates of the team's work and the scheme by which it borrowed GPUs belong in
    docs/decisions.md (and in each record's provenance), not in the pages people read to use polyvse."""
    found = {}
    for page in user_pages():
        marks = lab_notebook_marks(page.read_text(encoding="utf-8"), page.name)
        if marks:
            found[str(page.relative_to(REPO))] = marks
    assert found == {}, "move these to docs/decisions.md (or cite the record instead):\n" + json.dumps(
        found, indent=1, ensure_ascii=False
    )


def test_the_history_check_finds_what_it_looks_for():
    bad = (
        "Adopted on 2026-11-28 (issue #27, issue 31) in commit 0b1b75c, during one GPU window lent for 15\n"
        "minutes.\n```\nmake 1fd8837\n```\n<!-- x:start -->\nchosen in the rounds of 2026-11-25 at 4bf4b19\n"
        "[`r.json`](r.json) (2026-11-28, commit 63db45dae380, issue #53)\n<!-- x:end -->\n"
        "[gpu_check_h200_a4fe419.json](../results/gpu_check_h200_a4fe419.json), [a](page.md#section-12)\n"
    )
    labels = [m.split(" (in:")[0] for m in lab_notebook_marks(bad)]
    assert labels == [
        "commit hash '0b1b75c'",
        "date '2026-11-28'",
        "issue number 'issue #27'",
        "issue number 'issue 31'",
        "machine-lending words 'GPU window'",
        "machine-lending words 'lent'",
        "commit hash '4bf4b19'",
        "date '2026-11-25'",
        "issue number 'issue #53'",
    ]
    assert lab_notebook_marks("EfficientNet-Lite2, 1024-d, e5, see [x](#two-commands), &#124; R@1") == []
    cited = (
        "<!-- x:start -->\nrecord [`r.json`](r.json) (reconstructed provenance) (an earlier build of the product model) (2026-11-28, AMD EPYC (2 cores), "
        "commit 63db45dae380); `results/archive/test-x-2026-11-27/`\n<!-- x:end -->\n"
    )
    assert lab_notebook_marks(cited) == []
    assert lab_notebook_marks(cited.replace("<!-- x:start -->", "").replace("<!-- x:end -->", "")) != []


# ------------------------------------------------------------------ how each language is served, as the record says

_STATUS_WORDS = {
    "trained": re.compile(r"\btrained (?:on|in) (?:it|them)\b|\btrained languages?\b|\bserved as trained\b", re.I),
    "zero-shot": re.compile(r"\bzero[- ]shot\b", re.I),
    "adapted": re.compile(r"\badapt(?:ed|s|ing)?\b|\btaught\b|\bteach(?:es|ing)?\b", re.I),
}
# a sentence that only weighs the ways against each other ("zero-shot against teacher learning") claims none
_COMPARING = re.compile(r"\b(?:against|instead of|versus|vs\.?|compared|rather than|than)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(*])|\n\s*\n|\n(?=\s*[-*] )")


def served_languages() -> dict[str, tuple[str, str]]:
    """code -> (English name, how the product model serves it) from results/languages-model.json."""
    import langcodes

    record = json.loads((REPO / "results" / "languages-model.json").read_text(encoding="utf-8"))
    out = {}
    for row in record["rows"].values():
        if row["captions"].startswith("f8k-full") or row["lang"] not in out:
            out[row["lang"]] = (langcodes.Language.get(row["lang"]).display_name("en"), row["status"])
    return out


def _statements(text: str) -> list[str]:
    """Sentences of the prose and lines of the code blocks (a command's comment is a statement too)."""
    text = without_generated(text)
    units = []
    for m in _FENCE.finditer(text):
        units += m.group(0).splitlines()
    prose = _LINK_TARGET.sub("]()", _FENCE.sub("\n\n", text))
    units += [" ".join(s.split()) for s in _SENTENCE.split(prose)]
    return [u for u in units if u.strip()]


def wrong_served_as(text: str, languages: dict[str, tuple[str, str]]) -> list[str]:
    """Statements that name a language with a way of serving it other than the record's, and not the record's."""
    wrong = []
    for unit in _statements(text):
        if _COMPARING.search(unit):
            continue
        for code, (name, status) in languages.items():
            named = re.search(rf"\b{re.escape(name)}\b", unit) or re.search(
                rf"--lang {re.escape(code)}\b|\({re.escape(code)}[,)]", unit
            )
            if not named:
                continue
            if status == "trained":  # trained languages are named everywhere: only a claim about serving counts
                claim = re.search(
                    rf"\b{re.escape(name)}\b[^.;]*?\b(?:is|are) (?:served |answered )?(?P<s>zero[- ]shot|"
                    r"adapted|taught)",
                    unit,
                )
                others = [("zero-shot" if "shot" in claim.group("s") else "adapted")] if claim else []
            else:
                others = [s for s, rx in _STATUS_WORDS.items() if s != status and rx.search(unit)]
            if others and not _STATUS_WORDS[status].search(unit):
                wrong.append(
                    f"{name} ({code}) is {status} in results/languages-model.json, not {others[0]}: "
                    f"{unit.strip()[:160]}"
                )
    return wrong


def test_every_served_as_agrees_with_the_languages_record():
    languages = served_languages()
    assert languages["es"][1] == "adapted" and languages["en"][1] == "trained"
    found = []
    for page in user_pages():
        if page.name == _WALKTHROUGH:
            continue  # the walkthrough is a run's record: it says how the checkpoint it names served each language
        found += [
            f"{page.relative_to(REPO)}: {w}" for w in wrong_served_as(page.read_text(encoding="utf-8"), languages)
        ]
    assert found == []


def test_the_served_as_check_finds_what_it_looks_for():
    languages = {"es": ("Spanish", "adapted"), "de": ("German", "trained")}
    bad = (
        "On the product model Spanish and Arabic are served zero-shot. German is served zero-shot too.\n\n"
        "```\npolyvse search --lang es x   # zero-shot\n```\n"
    )
    assert len(wrong_served_as(bad, languages)) == 3
    good = (
        "`make model` teaches the product Spanish after training. German is a trained language. Zero-shot "
        "against teacher learning, for Spanish: see the curves."
    )
    assert wrong_served_as(good, languages) == []


# ------------------------------------------------------------------------- the curated API page matches the code

# the name a signature line of docs/api.md starts with -> the object it documents
API_OBJECTS = {
    "polyvse.load": "polyvse.model.loading:load",
    "model.encode_text": "polyvse.model.torch_model:PolyvseModel.encode_text",
    "model.encode_image": "polyvse.model.torch_model:PolyvseModel.encode_image",
    "model.similarity": "polyvse.model.torch_model:PolyvseModel.similarity",
    "model.retrieval_scores": "polyvse.model.torch_model:PolyvseModel.retrieval_scores",
    "PhotoIndex.open": "polyvse.index.store:PhotoIndex.open",
    "Searcher": "polyvse.index.search:Searcher",
    "searcher.text": "polyvse.index.search:Searcher.text",
    "searcher.image": "polyvse.index.search:Searcher.image",
    "searcher.similar": "polyvse.index.search:Searcher.similar",
    "build_index": "polyvse.index.build:build_index",
    "add_to_index": "polyvse.index.build:add_to_index",
    "AdaptRequest": "polyvse.adaptation.adapt:AdaptRequest",
    "adapt_language": "polyvse.adaptation.adapt:adapt_language",
}
_SIGNATURE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\((?P<params>.*)\)(?: -> (?P<ret>.+))?$")


def _split_params(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{" and 1 or (-1 if ch in ")]}" else 0)
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def _resolve(target: str):
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def api_page_signatures() -> dict[str, str]:
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    out = {}
    for m in _FENCE.finditer(text):
        lines = m.group(0).splitlines()[1:-1]
        for line in lines:
            sig = _SIGNATURE.match(line.strip())
            if sig and sig.group("name") in API_OBJECTS:  # the signature comes before the examples that call it
                out.setdefault(sig.group("name"), line.strip())
    return out


def test_the_api_page_signatures_are_the_codes():
    import polyvse

    sigs = api_page_signatures()
    assert set(sigs) == set(API_OBJECTS), f"docs/api.md lacks signatures of {sorted(set(API_OBJECTS) - set(sigs))}"
    # polyvse.load is the documented entry point; it passes every argument through to polyvse.model.loading.load
    assert list(inspect.signature(polyvse.load).parameters) == list(
        inspect.signature(_resolve(API_OBJECTS["polyvse.load"])).parameters
    )
    problems = []
    for name, line in sigs.items():
        code = inspect.signature(_resolve(API_OBJECTS[name]))
        params = [p for p in code.parameters.values() if p.name != "self" and p.kind != p.VAR_KEYWORD]
        m = _SIGNATURE.match(line)
        documented, keyword_only = [], False
        for item in _split_params(m.group("params")):
            if item == "*":
                keyword_only = True
                continue
            pname, _, rest = item.partition(":")
            annotation, _, default = rest.partition(" = ") if rest else ("", "", "")
            if not rest and "=" in pname:
                pname, _, default = pname.partition("=")
            documented.append((pname.strip(), annotation.strip(), default.strip(), keyword_only))
        if [d[0] for d in documented] != [p.name for p in params]:
            problems.append(f"{name}: documented {[d[0] for d in documented]}, code {[p.name for p in params]}")
            continue
        for (pname, annotation, default, kw), p in zip(documented, params):
            if kw != (p.kind == p.KEYWORD_ONLY):
                problems.append(f"{name}({pname}): keyword-only in one and not the other")
            if annotation and isinstance(p.annotation, str) and " ".join(p.annotation.split()) != annotation:
                problems.append(f"{name}({pname}): documented type {annotation!r}, code {p.annotation!r}")
            if bool(default) != (p.default is not p.empty):
                problems.append(f"{name}({pname}): a default in one and not the other")
            elif (
                default
                and re.fullmatch(r"[-\d.]+|\"[^\"]*\"|None|True|False", default)
                and repr(p.default) != repr(eval(default))
            ):  # noqa: S307 -- a literal, matched above
                problems.append(f"{name}({pname}): documented default {default}, code {p.default!r}")
        ret = m.group("ret")
        if ret and isinstance(code.return_annotation, str) and code.return_annotation.strip("'\"") != ret:
            problems.append(f"{name}: documented return {ret!r}, code {code.return_annotation!r}")
    assert problems == []


def test_the_site_renders_docstring_roles_and_bundles_its_math(site):
    """Sphinx roles in docstrings become code (docs/hooks/griffe_docstring_roles.py); the equations are rendered
    by the bundled KaTeX, so no page asks a CDN for anything."""
    load = (site / "reference" / "api" / "polyvse.model.loading" / "index.html").read_text(encoding="utf-8")
    assert ":func:" not in load and "<code>load</code>" in load
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert ":func:`" not in text and ":class:`" not in text and ":meth:`" not in text, page
        assert "cdn.jsdelivr" not in text and "mathjax" not in text.lower(), page
    katex = site / "javascripts" / "vendor" / "katex"
    assert (katex / "katex.min.js").is_file() and (katex / "fonts" / "KaTeX_Main-Regular.woff2").is_file()
    size = sum(f.stat().st_size for f in katex.rglob("*") if f.is_file())
    assert size < 2_000_000, f"the bundled KaTeX is {size} bytes: keep only what the pages need"
    mule = (site / "methods" / "mule" / "index.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' in mule and "javascripts/vendor/katex/katex.min.js" in mule
