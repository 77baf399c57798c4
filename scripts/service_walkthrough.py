"""Regenerate docs/service.md: run the index / search / serve walkthrough for real and write what it printed.

    python scripts/service_walkthrough.py                     # = make walkthrough
    python scripts/service_walkthrough.py --checkpoint C --data-root D --work DIR --out docs/service.md

The page's prose is the Markdown template docs/templates/service.md. Each `<!-- run: NAME -->` line of it is a
step of this script (``Walkthrough.step_NAME``), run in the template's order; its commands' real output replaces
the line, and the values the steps and the library's constants provide fill the template's ``{{ name }}`` fields
(Jinja2). Every `polyvse` command runs in this process through polyvse_app.cli.main (the code path of the
`polyvse` executable); its standard output and error are captured. `polyvse serve` runs as a real subprocess on
a free loopback port and the HTTP requests of the page are sent to it with httpx. Absolute paths in the captured
text are shown relative to the repository (`<repo>`) and the data root (`$POLYVSE_DATA`). The work folder
(default runs/walkthrough) is deleted and recreated. The page is written atomically, and beside the template
what filled it with the run's provenance (docs/templates/service.outputs.json, which tests/test_walkthrough.py
renders again and holds to the product's build record); if any step
does not do what the page says it does (a command fails, a refusal is not refused, a bad request gets a 2xx or a
5xx), the script stops with an error and leaves the old page in place.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import io
import json
import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from polyvse_tooling.harness import ServerError, free_port, git, machine_line, serving

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "docs" / "templates" / "service.md"
SERVE_START_TIMEOUT = 600.0  # seconds; embedding the caption collection on a loaded 2-core machine is slow
RUN_MARKER = re.compile(r"^<!-- run: (\w+) -->$", re.MULTILINE)

GERMAN = "zwei Hunde spielen im Schnee"
ENGLISH = "two dogs are playing in the snow"
CHINESE = "两只狗在雪地里玩"
FRENCH = "deux chiens jouent dans la neige"
TOO_SHORT = "Hund"
AMBIGUOUS = "a man rides a bike"
SPANISH = "dos perros juegan en la nieve"
QUECHUA = "iskay allqukuna rit'ipi pukllachkanku"  # "two dogs are playing in the snow"
NEW_LANG, ADAPT_LINES = "qu", 1000  # the language the page teaches, from this many MultiScript30k lines
# languages no text tower documents, in the order the refusal example takes the first the served model lacks: the
# product is taught Quechua and Guarani after training, a checkpoint before adaptation is not
UNSERVED = ("qu", "gn", "ay", "wo")

PYTHON_EXAMPLE = """\
import os

import polyvse
from polyvse.index import PhotoIndex, Searcher

model = polyvse.load({checkpoint!r})
searcher = Searcher(model, PhotoIndex.open({index!r}))   # refuses a model other than the index's

result = searcher.text({query!r}, lang="auto", k=3)
print(result.lang, round(result.detected.confidence, 2))
for hit in result.hits:
    print(hit.rank, round(hit.score, 4), hit.id, hit.name)
photo = {photo}
print([h.name for h in searcher.image(photo, k=2)])
"""


class WalkthroughError(RuntimeError):
    """A step did not do what the page says it does."""


# -- paths as the page shows them -------------------------------------------------------------------------
@dataclass
class Places:
    repo: Path
    data_root: Path
    work: Path
    checkpoint: Path
    out: Path | None = None
    labels: list[tuple[str, str]] = field(default_factory=list)  # (absolute prefix, shown as), longest first

    def __post_init__(self):
        pairs = [(self.data_root, "$POLYVSE_DATA"), (self.repo, "<repo>")]
        if not _inside(self.work, self.repo):
            pairs.append((self.work, "<work>"))
        if not _inside(self.checkpoint, self.repo) and not _inside(self.checkpoint, self.work):
            pairs.append((self.checkpoint, "<checkpoint>"))
        if self.out is not None and not _inside(self.out, self.repo):
            pairs.append((self.out, "<out>"))
        pairs = sorted(pairs, key=lambda p: len(str(p[0])), reverse=True)
        self.labels = [(str(p), shown) for p, shown in pairs]

    def arg(self, path: Path) -> str:
        """A path in a command line: relative to the repository (commands run from its root), else labelled."""
        path = Path(path).resolve()
        if _inside(path, self.data_root):
            rel = path.relative_to(self.data_root).as_posix()
            return "$POLYVSE_DATA" + ("" if rel == "." else "/" + rel)
        if _inside(path, self.repo):
            return path.relative_to(self.repo).as_posix() or "."
        return self.clean(str(path))

    def clean(self, text: str) -> str:
        """Captured text with absolute prefixes replaced by their labels."""
        for prefix, shown in self.labels:
            text = re.sub(re.escape(prefix) + r"(?=$|[/\s'\"),:;])", lambda _m, s=shown: s, text)
        return text


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False


# -- the page ---------------------------------------------------------------------------------------------
def outputs_path(page: Path) -> Path:
    """Where what filled the template is kept: beside the template, named after the page."""
    return TEMPLATE.parent / f"{page.stem}.outputs.json"


def render(template: str, blocks: dict[str, str], values: dict) -> str:
    """The page: the template's fields filled with ``values`` (Jinja2; a missing one is an error), then each
    run marker replaced by its step's output ``blocks[name]``."""
    import jinja2

    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True, autoescape=False
    )
    env.filters["thousands"] = lambda n: f"{n:,}"
    return RUN_MARKER.sub(lambda m: blocks[m.group(1)], env.from_string(template).render(values))


def fence(places: Places, lines: list[str], lang: str = "") -> str:
    """A fenced code block of captured lines, absolute paths replaced by their labels."""
    body = "\n".join(lines).rstrip("\n")
    return f"```{lang}\n{places.clean(body)}\n```"


def _shell_word(word: str) -> str:
    """Shell quoting, except for the leading $POLYVSE_DATA (kept expandable) or <label> placeholder."""
    m = re.match(r"^(\$POLYVSE_DATA|<[a-z]+>)(.*)$", word, re.DOTALL)
    if m:
        rest = m.group(2)
        return m.group(1) + (rest if shlex.quote(rest) == rest or not rest else shlex.quote(rest))
    return shlex.quote(word)


@dataclass
class Ran:
    code: int
    output: str
    shown: str  # "$ command" + output, ready for a block


_T0 = time.time()


def progress(message: str) -> None:
    """What the script is doing, on standard error (not on the page)."""
    print(f"[{time.time() - _T0:6.1f} s] {message}", file=sys.stderr, flush=True)


def polyvse_cli(places: Places, *args, expect: int | tuple[int, ...] = 0) -> Ran:
    """Run `polyvse ARGS` in this process (polyvse_app.cli.main), capturing stdout and stderr together; ``expect``:
    the exit code, or the codes the page describes either way (an answer or a refusal)."""
    from polyvse_app.cli import main

    real = [str(a.resolve()) if isinstance(a, Path) else str(a) for a in args]
    shown_cmd = "$ polyvse " + " ".join(
        _shell_word(places.arg(a)) if isinstance(a, Path) else shlex.quote(str(a)) for a in args
    )
    progress(places.clean(shown_cmd[2:]))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            code = main(real)
        except SystemExit as exc:  # argparse errors
            code = exc.code if isinstance(exc.code, int) else 1
    out = buf.getvalue()
    if code not in (expect if isinstance(expect, tuple) else (expect,)):
        raise WalkthroughError(f"`{shown_cmd[2:]}` exited with {code}, expected {expect}:\n{out}")
    return Ran(code, out, shown_cmd + "\n" + out.rstrip("\n"))


def _hits(output: str) -> list[tuple[int, int, str]]:
    """(rank, photo id, name) rows of a `polyvse search` table."""
    rows = []
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].isdigit() and parts[2].isdigit():
            rows.append((int(parts[0]), int(parts[2]), parts[3]))
    return rows


# -- the checkpoint ------------------------------------------------------------------------------------------
def _adapted_languages(checkpoint: Path) -> list[str]:
    """The languages `polyvse adapt` taught a checkpoint (its config.json's adapted_languages)."""
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    return list(config.get("adapted_languages") or [])


def _checkpoint_summary(places: Places) -> tuple[str, list[str]]:
    ckpt = places.checkpoint
    training = json.loads((ckpt / "training.json").read_text(encoding="utf-8"))
    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    cfg = training.get("config") or {}
    facts = []
    for key in ("data", "split", "seed", "commit"):
        facts.append(f"{key} `{training.get(key, '(not recorded)')}`")
    extra = []
    if cfg.get("epochs") is not None:
        extra.append(f"{cfg['epochs']} epochs")
    if config.get("languages"):
        extra.append("languages " + ", ".join(config["languages"]))
    backbone = (config.get("image_features") or {}).get("backbone")
    if backbone:
        extra.append(f"image backbone {backbone}")
    return f"`{places.arg(ckpt)}`", facts + extra


# -- HTTP ---------------------------------------------------------------------------------------------------
def _without_timings(obj):
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k != "took_ms"}
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


class Http:
    """Requests to the running service, each recorded as request + status + response body."""

    def __init__(self, base: str):
        import httpx

        self.client = httpx.Client(base_url=base, timeout=300.0)

    def close(self) -> None:
        self.client.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        label: str | None = None,
        shown_request: str | None = None,
        expect=200,
        compact: bool = False,
        target: bytes | None = None,
        **kwargs,
    ):
        extensions = {"target": target} if target is not None else None
        progress((shown_request or f"{method} {path}")[:120])
        r = self.client.request(method, path, extensions=extensions, **kwargs)
        lines = [f"# {label}"] if label else []
        lines.append(shown_request or f"{method} {path}")
        ok = r.status_code in expect if isinstance(expect, (tuple, list, set)) else r.status_code == expect
        if not ok or r.status_code >= 500:
            raise WalkthroughError(f"{method} {path}: expected {expect}, got {r.status_code}: {r.text[:2000]}")
        ctype = r.headers.get("content-type", "")
        status = f"{r.status_code} {r.reason_phrase}"
        if ctype.startswith("application/json"):
            body = _without_timings(r.json())
            if compact:
                lines.append(f"{status}  {json.dumps(body, ensure_ascii=False)}")
            else:
                lines += [status, json.dumps(body, ensure_ascii=False, indent=2)]
        else:
            lines.append(f"{status}  ({ctype}, {len(r.content)} bytes)")
        return r, lines


def _multipart_shown(method: str, path: str, name: str, ctype: str, size: int, **fields) -> str:
    extra = "".join(f", {k}={v}" for k, v in fields.items())
    return f"{method} {path}  (multipart: file={name} as {ctype}, {size} bytes{extra})"


def _startup_lines(log_text: str) -> list[str]:
    out = []
    for line in log_text.splitlines():
        out.append(line)
        if "Uvicorn running on" in line:
            break
    return out


# -- the walkthrough ----------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--checkpoint",
        default="runs/model/checkpoint",
        metavar="DIR",
        help="trained checkpoint (default: %(default)s, from `make model`; runs/demo/checkpoint from "
        "`make demo` works too)",
    )
    p.add_argument(
        "--data-root",
        metavar="DIR",
        help="data root holding flickr8k/images and the caption corpora (default: $POLYVSE_DATA)",
    )
    p.add_argument(
        "--work",
        default="runs/walkthrough",
        metavar="DIR",
        help="work folder for the index, the new photos and the caption file; deleted and recreated "
        "(default: %(default)s)",
    )
    p.add_argument("--out", default="docs/service.md", metavar="FILE", help="the page to write (default: %(default)s)")
    p.add_argument(
        "--outputs",
        metavar="FILE",
        help="where to write what filled the page, with the run's provenance (default: beside the template, "
        "docs/templates/service.outputs.json, when --out is docs/service.md; else not written)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=8000,
        help="port for `polyvse serve` if it is free, else any free loopback port (default: %(default)s)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="photo decoding processes for `polyvse index` (default: the command's own default)",
    )
    return p.parse_args(argv)


def _resolve(path: str) -> Path:
    p = Path(path).expanduser()
    return (p if p.is_absolute() else REPO / p).resolve()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data_root = args.data_root or os.environ.get("POLYVSE_DATA")
    if not data_root:
        print(
            "service_walkthrough: give --data-root or set POLYVSE_DATA (make walkthrough sets it to .data)",
            file=sys.stderr,
        )
        return 2
    out = _resolve(args.out)
    places = Places(
        repo=REPO,
        data_root=_resolve(data_root),
        work=_resolve(args.work),
        checkpoint=_resolve(args.checkpoint),
        out=out,
    )
    images = places.data_root / "flickr8k" / "images"
    for need, what in (
        (
            places.checkpoint / "training.json",
            "checkpoint (run `make model`, or pass --checkpoint runs/demo/checkpoint after `make demo`)",
        ),
        (images, "photo folder flickr8k/images of the data root (run `make data`)"),
    ):
        if not need.exists():
            print(f"service_walkthrough: no {what}: {need}", file=sys.stderr)
            return 2
    work = places.work
    for keep in (places.repo, places.data_root, places.checkpoint, out):
        if _inside(keep, work):
            print(f"service_walkthrough: refusing to delete the work folder {work}: it holds {keep}", file=sys.stderr)
            return 2
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    os.environ["POLYVSE_DATA"] = str(places.data_root)  # what `export POLYVSE_DATA=...` does for the commands

    template = TEMPLATE.read_text(encoding="utf-8")
    from polyvse.provenance import checkpoint_model, git_state, provenance

    tree = git_state(REPO)  # the checkout the run started on: a change during the run does not rename it
    started = _dt.datetime.now(_dt.UTC)
    load_before = os.getloadavg()[0]
    walk = Walkthrough(places, images, args)
    try:
        blocks = walk.run(RUN_MARKER.findall(template))
    except (WalkthroughError, ServerError) as exc:
        print(f"service_walkthrough: {places.clean(str(exc))}", file=sys.stderr)
        return 1
    load_after = os.getloadavg()[0]

    command = _command_line(places, argv if argv is not None else sys.argv[1:])
    values = {**walk.values, **_header_values(places, command, started, load_before, load_after)}
    text = render(template, blocks, values)
    leftovers = [str(p) for p in (places.repo, places.data_root, places.work, places.checkpoint) if str(p) in text]
    if leftovers:
        raise WalkthroughError(f"absolute paths left in the page: {leftovers}")
    from polyvse.util.atomic import atomic_path

    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    outputs = _resolve(args.outputs) if args.outputs else None
    if outputs is None and out == (REPO / "docs" / "service.md").resolve():  # the committed page: keep what made it
        outputs = outputs_path(out)
    if outputs is not None:
        with atomic_path(outputs) as tmp:
            tmp.write_text(
                json.dumps(
                    {
                        "values": values,
                        "blocks": blocks,
                        # the record of the run: its checkout, machine and the model that answered
                        "provenance": provenance(command, checkpoint_model(places.checkpoint), tree=tree),
                    },
                    ensure_ascii=False,
                    indent=1,
                )
                + "\n",
                encoding="utf-8",
            )
    print(f"wrote {places.arg(out)} ({len(text.splitlines())} lines)")
    return 0


_PATH_OPTIONS = ("--checkpoint", "--data-root", "--work", "--out", "--outputs")


def _command_line(places: Places, argv: list[str]) -> str:
    """The script's command line as run, with its path arguments shown like every other path of the page."""
    words, path_next = ["python", "scripts/service_walkthrough.py"], False
    for a in argv:
        if path_next:
            words.append(_shell_word(places.arg(_resolve(a))))
        elif a.startswith(_PATH_OPTIONS) and "=" in a:
            opt, value = a.split("=", 1)
            words.append(opt + "=" + _shell_word(places.arg(_resolve(value))))
        else:
            words.append(shlex.quote(a))
        path_next = a in _PATH_OPTIONS
    return " ".join(words)


def _header_values(places: Places, command: str, started, load_before: float, load_after: float) -> dict:
    """The fields of the page's "How this page was made" list."""
    ckpt, facts = _checkpoint_summary(places)
    head = git("rev-parse", "--short=12", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    repo_state = f"commit `{head}`" + (" with uncommitted changes" if dirty else "") if head else "(no git)"
    data_line = (
        "export POLYVSE_DATA=$PWD/.data     # as the Makefile does: reuse the data and feature cache of `make model`"
        if places.data_root == (places.repo / ".data").resolve()
        else "export POLYVSE_DATA=/path/to/data   # the data root that holds flickr8k/images"
    )
    return {
        "checkpoint": places.arg(places.checkpoint),
        "command": command,
        "checkpoint_facts": ", ".join(facts),
        "repo_state": repo_state,
        "work": places.arg(places.work),
        "machine": machine_line(),
        "load_before": f"{load_before:.1f}",
        "load_after": f"{load_after:.1f}",
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "data_line": data_line,
    }


class Walkthrough:
    """The page's steps (``step_NAME`` for each `<!-- run: NAME -->` of the template), in the template's order;
    each returns its code block(s) and leaves what the prose quotes in ``values``."""

    def __init__(self, places: Places, images: Path, args):
        from polyvse.index import DEFAULT_EXACT_THRESHOLD, DEFAULT_RECALL_TARGET
        from polyvse.index.ann import N_PROBES
        from polyvse.index.search import MAX_QUERY_CHARS
        from polyvse.index.store import HNSW_EF_CONSTRUCTION, HNSW_M, IVF_RETRAIN_GROWTH
        from polyvse.text.langid import DEFAULT_MIN_CONFIDENCE, MAX_CANDIDATES, MIN_CJK, MIN_LETTERS, MIN_WORDS
        from polyvse_app.service.settings import THUMB_SIZES

        self.places, self.images, self.args = places, images, args
        self.work = places.work
        self.index = self.work / "index"
        self.workers = ["--workers", str(args.workers)] if args.workers is not None else []
        self.values = dict(
            DEFAULT_EXACT_THRESHOLD=DEFAULT_EXACT_THRESHOLD,
            DEFAULT_RECALL_TARGET=DEFAULT_RECALL_TARGET,
            N_PROBES=N_PROBES,
            MAX_QUERY_CHARS=MAX_QUERY_CHARS,
            HNSW_EF_CONSTRUCTION=HNSW_EF_CONSTRUCTION,
            HNSW_M=HNSW_M,
            IVF_RETRAIN_GROWTH=IVF_RETRAIN_GROWTH,
            DEFAULT_MIN_CONFIDENCE=DEFAULT_MIN_CONFIDENCE,
            MIN_CJK=MIN_CJK,
            MIN_LETTERS=MIN_LETTERS,
            MIN_WORDS=MIN_WORDS,
            THUMB_SIZES=list(THUMB_SIZES),
            GERMAN=GERMAN,
            TOO_SHORT=TOO_SHORT,
            AMBIGUOUS=AMBIGUOUS,
            MAX_CANDIDATES=MAX_CANDIDATES,
        )
        self.top: list[Path] = []  # the two best photos for the German query
        self.stack = contextlib.ExitStack()  # the running server, until every step has run

    def run(self, names: list[str]) -> dict[str, str]:
        """Each named step once, in this order: {name: its output for the page}."""
        with self.stack:
            return {name: getattr(self, f"step_{name}")() for name in names}

    def polyvse(self, *a, expect: int | tuple[int, ...] = 0) -> Ran:
        return polyvse_cli(self.places, *a, expect=expect)

    def fence(self, runs: list[Ran]) -> str:
        """Commands and their output in one block, a blank line apart."""
        return fence(self.places, [line for r in runs for line in (r.shown, "")][:-1])

    # 1. build
    def step_build(self) -> str:
        build = self.polyvse(
            "index",
            "build",
            "--checkpoint",
            self.places.checkpoint,
            "--images",
            self.images,
            "--out",
            self.index,
            "--quiet",
            *self.workers,
        )
        return self.fence([build, self.polyvse("index", "info", "--index", self.index)])

    # 2. search
    def step_search(self) -> str:
        from polyvse.index import PhotoIndex

        index = self.index
        de = self.polyvse("search", "--index", index, GERMAN, "--lang", "de", "-k", "5")
        en = self.polyvse("search", "--index", index, ENGLISH, "--lang", "en", "-k", "3")
        zh = self.polyvse("search", "--index", index, CHINESE, "--lang", "zh", "-k", "3")
        de_hits = _hits(de.output)
        if len(de_hits) < 2:
            raise WalkthroughError(f"the German search found fewer than 2 photos:\n{de.output}")
        by_id = {p.id: p for p in PhotoIndex.open(index).photos}
        self.top = [Path(by_id[i].path) for _, i, _ in de_hits[:2]]
        img = self.polyvse("search", "--index", index, "--image", self.probe, "-k", "3")
        img_hits = _hits(img.output)
        self.values["itself"] = bool(img_hits and img_hits[0][2] == self.probe.name)
        return self.fence([de, en, zh, img])

    @property
    def probe(self) -> Path:
        """The photo the photo searches start from: the best for the German query."""
        return self.top[0]

    def step_auto(self) -> str:
        index = self.index
        runs = [self.polyvse("search", "--index", index, FRENCH, "--lang", "auto", "-k", "3")]
        # answered or refused depending on the model (the page says which): a frozen-tower model searches as a
        # plausible language, a word-level one asks for a clear detection
        for name, query in (("short", TOO_SHORT), ("ambiguous", AMBIGUOUS)):
            runs.append(self.polyvse("search", "--index", index, query, "--lang", "auto", "-k", "3", expect=(0, 2)))
            self.values[f"{name}_answered"] = runs[-1].code == 0
        return self.fence(runs)

    def step_languages(self) -> str:
        """A language the model never trained on: served zero-shot by frozen towers, refused by a word-level
        model; one it cannot read at all, refused with the way to teach it -- or answered, where the checkpoint
        was taught it after training (`make model`'s adaptation stage teaches the product Quechua)."""
        from polyvse.languages import language_name

        taught = NEW_LANG in _adapted_languages(self.places.checkpoint)
        es = self.polyvse("search", "--index", self.index, SPANISH, "--lang", "es", "-k", "3", expect=(0, 2))
        qu = self.polyvse(
            "search",
            "--index",
            self.index,
            QUECHUA,
            "--lang",
            NEW_LANG,
            *(["-k", "3"] if taught else []),
            expect=0 if taught else 2,
        )
        self.values.update(
            spanish_answered=es.code == 0,
            spanish_adapted="es" in _adapted_languages(self.places.checkpoint),
            NEW_LANG=NEW_LANG,
            NEW_LANG_NAME=language_name(NEW_LANG),
            QUECHUA=QUECHUA,
            ADAPT_LINES=ADAPT_LINES,
            new_lang_adapted=taught,
        )
        return self.fence([es, qu])

    def step_adapt(self) -> str:
        """`polyvse adapt` from a parallel file of the new language, then a search in it with the adapted
        checkpoint over the same index (a word-level model is refused, saying why). A checkpoint taught the
        language already (the product after `make model`) is not taught it again: the trained checkpoint `make
        model` kept beside it is, from scratch."""
        pairs, adapted = self.work / f"{NEW_LANG}-en.tsv", self.work / f"model-{NEW_LANG}"
        source, trained = self.places.checkpoint, self.places.checkpoint.parent / "trained-checkpoint"
        if NEW_LANG in _adapted_languages(source) and (trained / "config.json").is_file():
            source = trained
        self.values.update(taught_from_trained=source != self.places.checkpoint, adapt_source=self.places.arg(source))
        runs = [
            self.polyvse(
                "data", "parallel", "--lang", NEW_LANG, "--pivot", "en", "--lines", str(ADAPT_LINES), "--out", pairs
            )
        ]
        runs.append(
            self.polyvse(
                "adapt",
                "--checkpoint",
                source,
                "--lang",
                NEW_LANG,
                "--parallel",
                pairs,
                "--out",
                adapted,
                "--quiet",
                expect=(0, 2),
            )
        )
        self.values["adapted"] = runs[-1].code == 0
        self.values["adapted_checkpoint"] = self.places.arg(adapted)
        if self.values["adapted"]:
            runs.append(
                self.polyvse(
                    "search", "--checkpoint", adapted, "--index", self.index, QUECHUA, "--lang", NEW_LANG, "-k", "3"
                )
            )
            runs.append(
                self.polyvse(
                    "search", "--checkpoint", adapted, "--index", self.index, GERMAN, "--lang", "de", "-k", "3"
                )
            )
        return self.fence(runs)

    # 3. add
    def step_add(self) -> str:
        from PIL import Image, ImageOps

        mine = self.work / "my_photos"
        mine.mkdir()
        mirrored = []
        for src in self.top:
            dest = mine / f"{src.stem}_mirrored.jpg"
            with Image.open(src) as im:
                ImageOps.mirror(im.convert("RGB")).save(dest, quality=95)
            mirrored.append(dest)
        self.values["my_photos"] = self.places.arg(mine)
        self.values["mirrored"] = ", ".join(f"`{p.name}`" for p in mirrored)
        add = self.polyvse("index", "add", "--index", self.index, "--images", mine, "--quiet", *self.workers)
        again = self.polyvse("index", "add", "--index", self.index, "--images", self.images, "--quiet", *self.workers)
        de2 = self.polyvse("search", "--index", self.index, GERMAN, "--lang", "de", "-k", "3")
        found = [name for _, _, name in _hits(de2.output) if name.endswith("_mirrored.jpg")]
        self.values["found"] = " and ".join(f"`{n}`" for n in found)
        return self.fence([add, again, de2])

    # 4. python
    def step_python(self) -> str:
        """The example's code as shown, then what it printed when run with the paths made absolute."""
        places = self.places
        shown_photo = places.arg(self.probe)
        photo_expr = (
            f"os.path.expandvars({shown_photo!r})" if shown_photo.startswith("$POLYVSE_DATA") else repr(shown_photo)
        )
        shown_code = PYTHON_EXAMPLE.format(
            checkpoint=places.arg(places.checkpoint), index=places.arg(self.index), query=GERMAN, photo=photo_expr
        )
        real_code = PYTHON_EXAMPLE.format(
            checkpoint=str(places.checkpoint), index=str(self.index), query=GERMAN, photo=photo_expr
        )
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(real_code, "example.py", "exec"), {"__name__": "__example__"})  # noqa: S102 (our own snippet)
        return (
            fence(places, [shown_code.rstrip("\n")], "python") + "\n\n" + fence(places, [buf.getvalue().rstrip("\n")])
        )

    # 5. serve: started here, stopped when every step has run
    def step_serve(self) -> str:
        captions = self.work / "test-captions.jsonl"
        export = self.polyvse("data", "export", "--dataset", "f8k-ml", "--split", "test", "--out", captions)
        port = free_port(self.args.port)
        serve_args = ["--index", self.index, "--captions", captions, "--port", str(port)]
        shown = "$ polyvse serve " + " ".join(
            _shell_word(self.places.arg(a)) if isinstance(a, Path) else a for a in serve_args
        )
        log_path = self.work / "serve.log"
        progress(self.places.clean(shown[2:]))
        _proc, base = self.stack.enter_context(
            serving(
                serve_args,
                log_path,
                port,
                timeout=SERVE_START_TIMEOUT,
                cwd=REPO,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        )
        progress("polyvse serve answers /api/health")
        self.http = Http(base)
        self.stack.callback(self.http.close)
        self.values["port"] = port
        startup = _startup_lines(log_path.read_text(encoding="utf-8"))
        return fence(self.places, [export.shown, "", shown, *startup])

    def step_http(self) -> str:
        from polyvse.index import PhotoIndex

        http, probe = self.http, self.probe
        photo_bytes = probe.read_bytes()
        body = {"query": GERMAN, "lang": "auto", "k": 3}
        _, text_lines = http.call(
            "POST",
            "/api/search/text",
            json=body,
            shown_request=f"POST /api/search/text  {json.dumps(body, ensure_ascii=False)}",
        )
        params = {"q": "un homme fait du vélo", "lang": "fr", "k": 2}
        r, get_lines = http.call("GET", "/api/search/text", params=params)
        get_lines[0] = f"GET {r.request.url.raw_path.decode()}"
        upload = {"files": {"file": (probe.name, photo_bytes, "image/jpeg")}, "data": {"k": "3"}}
        _, img_lines = http.call(
            "POST",
            "/api/search/image",
            **upload,
            shown_request=_multipart_shown(
                "POST", "/api/search/image", probe.name, "image/jpeg", len(photo_bytes), k=3
            ),
        )
        _, cap_lines = http.call(
            "POST",
            "/api/captions/image",
            **upload,
            shown_request=_multipart_shown(
                "POST", "/api/captions/image", probe.name, "image/jpeg", len(photo_bytes), k=3
            ),
        )
        probe_id = next(p.id for p in PhotoIndex.open(self.index).photos if Path(p.path) == probe)
        _, sim_lines = http.call("GET", f"/api/photos/{probe_id}/similar?k=2")
        _, pcap_lines = http.call("GET", f"/api/photos/{probe_id}/captions?k=2&lang=de")
        _, health_lines = http.call("GET", "/api/health", compact=True)
        _, model_lines = http.call("GET", "/api/model")
        _, thumb_lines = http.call("GET", f"/api/photos/{probe_id}/thumbnail")
        _, file_lines = http.call("GET", f"/api/photos/{probe_id}")
        blocks = [
            text_lines,
            get_lines,
            img_lines,
            cap_lines,
            sim_lines,
            pcap_lines,
            health_lines,
            model_lines,
            thumb_lines,
            file_lines,
        ]
        return fence(self.places, [line for b in blocks for line in (*b, "")][:-1])

    def step_bad_input(self) -> str:
        bad = _bad_inputs(self.http, self.work, self.probe.read_bytes(), self.probe)
        return fence(self.places, [line for b in bad for line in (*b, "")][:-1])


def unserved_language(served) -> str:
    """The first of UNSERVED that the served model (its ``served_languages`` codes) does not read."""
    served = set(served)
    for code in UNSERVED:
        if code not in served:
            return code
    raise WalkthroughError(f"the served model reads every one of {', '.join(UNSERVED)}: add a language to UNSERVED")


def _bad_inputs(http: Http, work: Path, photo_bytes: bytes, probe: Path) -> list[list[str]]:
    from PIL import Image

    blocks = []

    def post_text(label, body, shown_body=None, expect=422):
        shown = f"POST /api/search/text  {shown_body or json.dumps(body, ensure_ascii=False)}"
        _, lines = http.call(
            "POST", "/api/search/text", json=body, label=label, shown_request=shown, expect=expect, compact=True
        )
        blocks.append(lines)

    def upload(label, name, data, ctype, expect=422):
        shown = _multipart_shown("POST", "/api/search/image", name, ctype, len(data))
        _, lines = http.call(
            "POST",
            "/api/search/image",
            files={"file": (name, data, ctype)},
            label=label,
            shown_request=shown,
            expect=expect,
            compact=True,
        )
        blocks.append(lines)

    post_text("empty query", {"query": "", "lang": "de"})
    post_text("10 kB query", {"query": "a" * 10240, "lang": "en"}, '{"query": "aaa…a" (10240 × "a"), "lang": "en"}')
    post_text("unknown language", {"query": "a dog", "lang": "xx"})
    post_text("a one-word query, language auto", {"query": TOO_SHORT, "lang": "auto"}, expect=(200, 422))
    unserved = unserved_language(row["code"] for row in http.client.get("/api/model").json()["served_languages"])
    # the refusal reads the code only; a sentence of the language where the page has one
    query = QUECHUA if unserved == NEW_LANG else ENGLISH
    post_text("a language the model does not know", {"query": query, "lang": unserved})
    post_text("k out of range", {"query": GERMAN, "lang": "de", "k": 0})

    text_file = b"These are my notes, not a photo.\n" * 8
    upload("not an image (a text file sent as a JPEG)", "notes.txt", text_file, "image/jpeg")
    upload("upload declared as text", "notes.txt", text_file, "text/plain", expect=415)
    upload("truncated JPEG (the first 3000 bytes of a photo)", "truncated.jpg", photo_bytes[:3000], "image/jpeg")
    big = work / "100mp.png"
    Image.new("1", (10000, 10000)).save(big)
    over = work / "50mp.png"
    Image.new("1", (10000, 5000)).save(over)
    upload("50-megapixel image (a PNG of 10000 × 5000 pixels)", over.name, over.read_bytes(), "image/png")
    upload("100-megapixel image (a PNG of 10000 × 10000 pixels)", big.name, big.read_bytes(), "image/png")
    upload("body over the upload limit (9 MiB)", "big.jpg", os.urandom(9 * 1024 * 1024), "image/jpeg", expect=413)

    for label, shown, target in (
        (
            "path traversal, encoded",
            "GET /api/photos/..%2F..%2F..%2Fetc%2Fpasswd",
            b"/api/photos/..%2F..%2F..%2Fetc%2Fpasswd",
        ),
        (
            "path traversal in the static files (raw path, not normalised by the client)",
            "GET /static/../../../../etc/passwd",
            b"/static/../../../../etc/passwd",
        ),
        (
            "path traversal in the thumbnail route",
            "GET /api/photos/../../../etc/passwd/thumbnail",
            b"/api/photos/../../../etc/passwd/thumbnail",
        ),
    ):
        r, lines = http.call(
            "GET", "/", label=label, shown_request=shown, target=target, expect=(400, 404, 422), compact=True
        )
        if b"root:" in r.content:
            raise WalkthroughError(f"{shown} served a file from outside the index")
        blocks.append(lines)
    _, lines = http.call("GET", "/api/photos/99999", label="unknown photo id", expect=404, compact=True)
    blocks.append(lines)
    return blocks


if __name__ == "__main__":
    sys.exit(main())
