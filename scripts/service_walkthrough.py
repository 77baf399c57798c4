"""Regenerate docs/service.md: run the index / search / serve walkthrough for real and write what it printed.

    python scripts/service_walkthrough.py                     # = make walkthrough
    python scripts/service_walkthrough.py --checkpoint C --data-root D --work DIR --out docs/service.md

Every `polyvse` command of the page runs in this process through polyvse_app.cli.main (the code path of the
`polyvse` executable); its standard output and error are captured. `polyvse serve` runs as a real subprocess on
a free loopback port and the HTTP requests of the page are sent to it with httpx. Absolute paths in the captured
text are shown relative to the repository (`<repo>`) and the data root (`$POLYVSE_DATA`). The work folder
(default runs/walkthrough) is deleted and recreated. The page is written atomically; if any step does not do
what the page says it does (a command fails, a refusal is not refused, a bad request gets a 2xx or a 5xx), the
script stops with an error and leaves the old page in place.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import io
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVE_START_TIMEOUT = 600.0  # seconds; embedding the caption collection on a loaded 2-core machine is slow

GERMAN = "zwei Hunde spielen im Schnee"
ENGLISH = "two dogs are playing in the snow"
CHINESE = "两只狗在雪地里玩"
FRENCH = "deux chiens jouent dans la neige"
TOO_SHORT = "Hund"
AMBIGUOUS = "a man rides a bike"
SPANISH = "los perros juegan en la nieve"

PYTHON_EXAMPLE = '''\
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
'''


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
class Page:
    def __init__(self, places: Places):
        self.places = places
        self.parts: list[str] = []

    def text(self, prose: str) -> None:
        self.parts.append(textwrap.dedent(prose).strip("\n") + "\n")

    def block(self, lines: list[str], lang: str = "") -> None:
        body = "\n".join(lines).rstrip("\n")
        self.parts.append(f"```{lang}\n{self.places.clean(body)}\n```\n")

    def render(self) -> str:
        return "\n".join(self.parts)


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


def polyvse_cli(places: Places, *args, expect: int = 0) -> Ran:
    """Run `polyvse ARGS` in this process (polyvse_app.cli.main), capturing stdout and stderr together."""
    from polyvse_app.cli import main

    real = [str(a.resolve()) if isinstance(a, Path) else str(a) for a in args]
    shown_cmd = "$ polyvse " + " ".join(_shell_word(places.arg(a)) if isinstance(a, Path) else shlex.quote(str(a))
                                        for a in args)
    progress(places.clean(shown_cmd[2:]))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            code = main(real)
        except SystemExit as exc:  # argparse errors
            code = exc.code if isinstance(exc.code, int) else 1
    out = buf.getvalue()
    if code != expect:
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


# -- the machine and the checkpoint ---------------------------------------------------------------------
def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / 1024 / 1024:.0f} GB RAM"
                break
    gpu = ""
    with contextlib.suppress(Exception):
        import torch

        gpu = ", GPU: " + torch.cuda.get_device_name(0) if torch.cuda.is_available() else ", no GPU"
    return (f"{os.cpu_count()} CPU cores ({cpu}){mem}{gpu}; {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30,
                              check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


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
def _free_port(preferred: int | None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise WalkthroughError("no free loopback port")


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

    def call(self, method: str, path: str, *, label: str | None = None, shown_request: str | None = None,
             expect=200, compact: bool = False, target: bytes | None = None, **kwargs):
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


@contextlib.contextmanager
def running_server(places: Places, argv_real: list[str], log_path: Path, port: int, env: dict):
    """`polyvse serve` as a subprocess (its output to log_path) until the block ends; yields (process, base URL)."""
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen([sys.executable, "-m", "polyvse_app.cli", *argv_real], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc, _wait_until_up(proc, log_path, f"http://127.0.0.1:{port}")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # uvicorn shuts down gracefully on Ctrl+C
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=30)


def _wait_until_up(proc, log_path: Path, base: str) -> str:
    import httpx

    deadline = time.time() + SERVE_START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise WalkthroughError(f"polyvse serve exited with {proc.returncode}:\n{log_path.read_text()}")
        try:
            if httpx.get(base + "/api/health", timeout=5.0).status_code == 200:
                progress("polyvse serve answers /api/health")
                return base
        except httpx.TransportError:
            pass
        if time.time() > deadline:
            raise WalkthroughError(f"polyvse serve did not answer /api/health within {SERVE_START_TIMEOUT:.0f} s:\n"
                                   f"{log_path.read_text()}")
        time.sleep(0.5)


def _startup_lines(log_text: str) -> list[str]:
    out = []
    for line in log_text.splitlines():
        out.append(line)
        if "Uvicorn running on" in line:
            break
    return out


# -- the walkthrough ----------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="runs/model/checkpoint", metavar="DIR",
                   help="trained checkpoint (default: %(default)s, from `make model`; runs/demo/checkpoint from "
                   "`make demo` works too)")
    p.add_argument("--data-root", metavar="DIR",
                   help="data root holding flickr8k/images and the caption corpora (default: $POLYVSE_DATA)")
    p.add_argument("--work", default="runs/walkthrough", metavar="DIR",
                   help="work folder for the index, the new photos and the caption file; deleted and recreated "
                   "(default: %(default)s)")
    p.add_argument("--out", default="docs/service.md", metavar="FILE", help="the page to write (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000,
                   help="port for `polyvse serve` if it is free, else any free loopback port (default: %(default)s)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="photo decoding processes for `polyvse index` (default: the command's own default)")
    return p.parse_args(argv)


def _resolve(path: str) -> Path:
    p = Path(path).expanduser()
    return (p if p.is_absolute() else REPO / p).resolve()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data_root = args.data_root or os.environ.get("POLYVSE_DATA")
    if not data_root:
        print("service_walkthrough: give --data-root or set POLYVSE_DATA (make walkthrough sets it to .data)",
              file=sys.stderr)
        return 2
    out = _resolve(args.out)
    places = Places(repo=REPO, data_root=_resolve(data_root), work=_resolve(args.work),
                    checkpoint=_resolve(args.checkpoint), out=out)
    images = places.data_root / "flickr8k" / "images"
    for need, what in ((places.checkpoint / "training.json", "checkpoint (run `make model`, or pass --checkpoint runs/demo/checkpoint after `make demo`)"),
                       (images, "photo folder flickr8k/images of the data root (run `make data`)")):
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

    started = _dt.datetime.now(_dt.UTC)
    load_before = os.getloadavg()[0]
    try:
        page = walkthrough(places, images, args)
    except WalkthroughError as exc:
        print(f"service_walkthrough: {places.clean(str(exc))}", file=sys.stderr)
        return 1
    load_after = os.getloadavg()[0]

    command = _command_line(places, argv if argv is not None else sys.argv[1:])
    head = _header(places, command, started, load_before, load_after)
    text = head + "\n" + page.render()
    leftovers = [str(p) for p in (places.repo, places.data_root, places.work, places.checkpoint) if str(p) in text]
    if leftovers:
        raise WalkthroughError(f"absolute paths left in the page: {leftovers}")
    from polyvse.atomic import atomic_path

    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    print(f"wrote {places.arg(out)} ({len(text.splitlines())} lines)")
    return 0


_PATH_OPTIONS = ("--checkpoint", "--data-root", "--work", "--out")


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


def _header(places: Places, command: str, started, load_before: float, load_after: float) -> str:
    ckpt, facts = _checkpoint_summary(places)
    head = _git("rev-parse", "--short=12", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    repo_state = f"commit `{head}`" + (" with uncommitted changes" if dirty else "") if head else "(no git)"
    data_line = ("export POLYVSE_DATA=$PWD/.data     # as the Makefile does: reuse the data and feature cache of "
                 "`make model`" if places.data_root == (places.repo / ".data").resolve()
                 else "export POLYVSE_DATA=/path/to/data   # the data root that holds flickr8k/images")
    return textwrap.dedent(f"""\
        # Putting a trained model to work: index, search, service

        After `make model` there is a trained model in `{places.arg(places.checkpoint)}`. This page turns it into a photo search
        engine: a FAISS index of the photos, a command-line search in any of the model's languages, and an HTTP service
        with a web page. Every command and request below was run as shown, and the output under it is what it printed.

        **How this page was made.** `scripts/service_walkthrough.py` runs every step and writes this page; `make
        walkthrough` regenerates it. This version:

        - command: `{command}` (`polyvse` commands run in-process through the `polyvse` entry point's `main`;
          `polyvse serve` runs as a separate process and is queried with httpx);
        - checkpoint: {ckpt}; its training metadata: {", ".join(facts)};
        - repository: {repo_state}; working folder `{places.arg(places.work)}` (deleted and recreated by the script);
        - machine: {_machine()}; shared with other jobs (1-minute load average {load_before:.1f} at the start,
          {load_after:.1f} at the end);
        - date: {started.strftime("%Y-%m-%d %H:%M UTC")}.

        Paths are shown relative to the repository (`<repo>`) and the data root (`$POLYVSE_DATA`). Durations in the
        output (seconds in `index` and `serve` messages) were measured on this shared, loaded machine: they are not
        benchmarks. The responses' `took_ms` fields are left out of the JSON shown here for the same reason.

        ```
        {data_line}
        ```
        """)


def walkthrough(places: Places, images: Path, args) -> Page:
    from polyvse.index import DEFAULT_EXACT_THRESHOLD, DEFAULT_RECALL_TARGET, PhotoIndex
    from polyvse.index.ann import N_PROBES
    from polyvse.index.search import MAX_QUERY_CHARS
    from polyvse.index.store import HNSW_EF_CONSTRUCTION, HNSW_M, IVF_RETRAIN_GROWTH
    from polyvse.langid import DEFAULT_MIN_CONFIDENCE, MIN_CJK, MIN_LETTERS, MIN_WORDS

    page = Page(places)
    work = places.work
    index = work / "index"
    ckpt = places.checkpoint
    workers = ["--workers", str(args.workers)] if args.workers is not None else []

    def run(*a, expect=0) -> Ran:
        return polyvse_cli(places, *a, expect=expect)

    # 1. build ----------------------------------------------------------------------------------------------
    page.text("## 1. Build an index")
    build = run("index", "build", "--checkpoint", ckpt, "--images", images, "--out", index, "--quiet", *workers)
    info = run("index", "info", "--index", index)
    page.block([build.shown, "", info.shown])
    page.text(f"""
        All photos under `--images` are indexed, searched recursively (`--list FILE` takes one path a line instead).
        Image features go through the same content-addressed cache as training, so photos the model was trained
        and evaluated on are not recomputed (the first line says how many came from the cache). A fresh collection
        shows progress bars (`--quiet` turns them off). If a build is killed, running it again resumes: finished
        photos are cache hits. Unreadable photos are listed and skipped (`--strict` stops at the first one).

        The search structure depends on the collection size:

        | photos | structure | what you get |
        |---|---|---|
        | fewer than `--exact-threshold` (default {DEFAULT_EXACT_THRESHOLD:,}) | FAISS `IndexFlatIP` over L2-normalised embeddings | exact cosine search |
        | at least the threshold | FAISS IVF-Flat, inner product, lists trained by k-means on a sample | approximate search. `nprobe` is tuned at build time until **recall@10 ≥ `--recall-target` (default {DEFAULT_RECALL_TARGET})** against exact search, measured on {N_PROBES} probe queries (normalised midpoints of random pairs of indexed photos). The measured recall is stored and shown by `index info` |
        | `--kind hnsw` (on request) | FAISS `IndexHNSWFlat` (M {HNSW_M}, efConstruction {HNSW_EF_CONSTRUCTION}, inner product) | approximate, with `efSearch` tuned the same way |
        | any size, model with a non-cosine similarity (order embeddings) | none: every photo is scored with the model's own similarity | exact. No inner-product index can rank an order-embedding score, so polyvse does not try (`--kind ivf/hnsw` is refused) |

        **What is in an index folder.** `manifest.json` holds the format version, the model's fingerprint, the
        search structure, the recall target and the measured recall, and the files of the current generation.
        `vectors.<g>.npy` holds the embeddings. `photos.<g>.jsonl` holds one line per photo: `id` (its row, which
        never changes), `name` (its path relative to the indexed folder) and `path` (absolute). `ann.<g>.faiss`
        holds the IVF lists or the HNSW graph when there are any. A new generation's files are written under new
        names first. Then `manifest.json` is replaced atomically, and that replacement is the only commit point. A
        build or append that is killed midway leaves the previous index working. A second writer started while one
        is running gets an error (`another polyvse index process is writing this index`) rather than a corrupt
        index.

        **The fingerprint.** The manifest records a SHA-256 over the model's weights, its similarity, its vocabulary
        and tokenizer settings, its image backbone and crop setting, and its languages. An index refuses queries
        from any other model (`polyvse search`, `index add` and `serve` stop with an error naming both models),
        because that model's embeddings live in a different space.
        """)

    # 2. search ---------------------------------------------------------------------------------------------
    page.text("## 2. Search from the command line")
    de = run("search", "--index", index, GERMAN, "--lang", "de", "-k", "5")
    en = run("search", "--index", index, ENGLISH, "--lang", "en", "-k", "3")
    zh = run("search", "--index", index, CHINESE, "--lang", "zh", "-k", "3")
    de_hits = _hits(de.output)
    if len(de_hits) < 2:
        raise WalkthroughError(f"the German search found fewer than 2 photos:\n{de.output}")
    by_id = {p.id: p for p in PhotoIndex.open(index).photos}
    top = [Path(by_id[i].path) for _, i, _ in de_hits[:2]]
    probe = top[0]
    img = run("search", "--index", index, "--image", probe, "-k", "3")
    page.block([de.shown, "", en.shown, "", zh.shown, "", img.shown])
    img_hits = _hits(img.output)
    itself = img_hits and img_hits[0][2] == probe.name
    page.text(
        "Each line is a rank, the model's similarity (cosine), the photo's id in the index, its name and its path.\n"
        "`--image PHOTO` embeds a photo with the model's image backbone and searches with it"
        + ("; the photo itself, being indexed, comes first" if itself else "")
        + ". Other options: `--similar-to ID` searches with an indexed photo, and `--json` prints JSON.")

    fr = run("search", "--index", index, FRENCH, "--lang", "auto", "-k", "3")
    short = run("search", "--index", index, TOO_SHORT, "--lang", "auto", expect=2)
    ambiguous = run("search", "--index", index, AMBIGUOUS, "--lang", "auto", expect=2)
    spanish = run("search", "--index", index, SPANISH, "--lang", "auto", expect=2)
    unknown_lang = run("search", "--index", index, GERMAN, "--lang", "ja", expect=2)
    page.text(f"""
        **`--lang auto`** detects the language with lingua, an offline detector. The answer must be one of the
        model's languages and is given only when the detector is sure:

        - Queries too short to tell are refused: fewer than {MIN_WORDS} words and {MIN_LETTERS} letters, or fewer
          than {MIN_CJK} Chinese or Japanese characters.
        - Queries whose best model language scores below {DEFAULT_MIN_CONFIDENCE} are refused.
        - Queries that read better as some language the model does not know are refused. Nothing is guessed:
        """)
    page.block([fr.shown, "", short.shown, "", ambiguous.shown, "", spanish.shown, "", unknown_lang.shown])
    page.text(f"""
        Errors exit with code 2. Other queries are refused with a message too: an empty query, a query over
        {MAX_QUERY_CHARS:,} characters, and a query with no word the model knows in that language.
        """)

    # 3. add ------------------------------------------------------------------------------------------------
    from PIL import Image, ImageOps

    mine = work / "my_photos"
    mine.mkdir()
    mirrored = []
    for src in top:
        dest = mine / f"{src.stem}_mirrored.jpg"
        with Image.open(src) as im:
            ImageOps.mirror(im.convert("RGB")).save(dest, quality=95)
        mirrored.append(dest)
    page.text(f"""
        ## 3. Add photos

        `polyvse index add` embeds only the photos that are not in the index yet, matched by file path. The photos
        already indexed are never recomputed: their embeddings are read back from the index. Here
        `{places.arg(mine)}` holds mirrored copies (made with Pillow) of the two best photos for the German query
        above: {", ".join(f"`{p.name}`" for p in mirrored)}. Adding the whole photo folder again adds nothing.
        """)
    add = run("index", "add", "--index", index, "--images", mine, "--quiet", *workers)
    again = run("index", "add", "--index", index, "--images", images, "--quiet", *workers)
    de2 = run("search", "--index", index, GERMAN, "--lang", "de", "-k", "3")
    page.block([add.shown, "", again.shown, "", de2.shown])
    found = [name for _, _, name in _hits(de2.output) if name.endswith("_mirrored.jpg")]
    if found:
        page.text("After the append, the search finds " + " and ".join(f"`{n}`" for n in found)
                  + " among its top 3.")
    page.text(f"""
        When an exact index grows past its threshold, it becomes IVF, trained on the stored vectors. An IVF index
        gets the new vectors added to its trained lists, and the lists are trained again once the index holds
        {IVF_RETRAIN_GROWTH}× what they were trained on. An HNSW index gets the new vectors inserted. Either way,
        `nprobe` or `efSearch` is tuned again to the recall target. The model is the checkpoint recorded in the
        index unless `--checkpoint` names one; either way, it must be the model that built the index.
        """)

    # 4. python ---------------------------------------------------------------------------------------------
    shown_photo = places.arg(probe)
    photo_expr = (f"os.path.expandvars({shown_photo!r})" if shown_photo.startswith("$POLYVSE_DATA")
                  else repr(shown_photo))
    shown_code = PYTHON_EXAMPLE.format(checkpoint=places.arg(ckpt), index=places.arg(index), query=GERMAN,
                                       photo=photo_expr)
    real_code = PYTHON_EXAMPLE.format(checkpoint=str(ckpt), index=str(index), query=GERMAN, photo=photo_expr)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(real_code, "example.py", "exec"), {"__name__": "__example__"})  # noqa: S102 (our own snippet)
    page.text("## 4. From Python")
    page.text("The same searches from Python, run from the repository's root. The script runs this code itself "
              "(with the paths made absolute); what it printed is below it.")
    page.block([shown_code.rstrip("\n")], "python")
    page.block([buf.getvalue().rstrip("\n")])
    page.text("""
        `polyvse.index.build_index(model, photos, out, cache_dir=...)` and `add_to_index(...)` do what the commands
        do. `polyvse.langid.detect_language(text, languages)` is the detector alone.
        """)

    # 5. serve ----------------------------------------------------------------------------------------------
    captions = work / "test-captions.jsonl"
    export = run("data", "export", "--dataset", "f8k-ml", "--split", "test", "--out", captions)
    port = _free_port(args.port)
    serve_args = ["serve", "--index", index, "--captions", captions, "--port", str(port)]
    serve_real = [str(a) for a in serve_args]
    serve_shown = "$ polyvse " + " ".join(_shell_word(places.arg(a)) if isinstance(a, Path) else a for a in serve_args)
    page.text("""
        ## 5. The HTTP service and its web page

        The photo→caption endpoints rank a caption collection: any JSONL, CSV/TSV or plain-text file of captions,
        embedded once at start-up. Here it is the F8K-ML test captions. The service runs until Ctrl+C; the start-up
        messages:
        """)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log_path = work / "serve.log"
    with running_server(places, serve_real, log_path, port, env) as (_proc, base):
        startup = _startup_lines(log_path.read_text(encoding="utf-8"))
        page.block([export.shown, "", serve_shown, *startup])
        http = Http(base)
        try:
            _http_section(page, places, http, base, port, probe, work, images)
        finally:
            http.close()

    # 6. tests ----------------------------------------------------------------------------------------------
    page.text("""
        ## 6. Tests

        `tests/test_index.py`, `test_search_cli.py`, `test_langid.py` and `test_serve.py` (FastAPI's TestClient) run
        in `make test`. They train one tiny model on a slice of the real F8K-ML photos. `tests/test_walkthrough.py`
        runs this page's script on a tiny model and checks that every section is there and that every bad request
        got a 4xx.

        `tests/test_browser.py` drives real headless Chromium (Debian's `chromium` package, through Playwright; no
        browser is downloaded) against uvicorn on a free loopback port:

        - it types a German query, picks German, and checks the thumbnails and scores;
        - it drops a photo on the page, and uses the file input, and checks the similar photos;
        - it checks that the search is kept in the address: the address after a search, opened in a new tab, shows
          the same photos, and Back and Forward go through earlier searches;
        - it checks that the server's refusals show on the page.

        `make test` installs Chromium first with `scripts/install-browser.sh` (a no-op once it is installed). If
        Chromium is missing, the test fails and names that script.

        ## 7. Load test

        `benchmarks/bench_serve_load.py` is not part of the test suite. It starts `polyvse serve` on 127.0.0.1 (or
        uses `--url`, which must be a loopback address), runs 50 concurrent clients for 30 s with at most 200,000
        requests, and stops by itself. The request mix follows what the web page does: text queries in every model
        language, with the language given and with `auto`; thumbnails; similar photos; model info and health; and a
        small share of photo uploads, which run the CNN. Every response must be a 2xx. The script reports latency
        percentiles overall and per kind of request, the machine's load average before and after, and exits 1 on
        any error:

        ```
        python benchmarks/bench_serve_load.py --index runs/walkthrough/index --out runs/walkthrough/bench_serve_load.json
        ```

        Its numbers depend on the machine and on what else runs on it; none are quoted here.
        """)
    return page


def _http_section(page: Page, places: Places, http: Http, base: str, port: int, probe: Path, work: Path,
                  images: Path) -> None:
    from polyvse.index import PhotoIndex
    from polyvse_app.service.settings import THUMB_SIZES

    page.text(f"""
        Start-up loads the image backbone and the language detector's models ("warm up"), so that the first requests
        are not slow. The service binds to 127.0.0.1 unless `--host` says otherwise. Its limits can be changed:
        `--max-upload-mb` (the whole request body) and `--max-megapixels` (larger images are refused from their
        header, before any decoding); `/api/model` below shows the values in force. `--threads` (default 1) sets
        the torch and FAISS threads used for each computation; concurrent requests already keep the cores busy.

        **The web page** at `http://127.0.0.1:{port}/` has:

        - a query box;
        - a language picker: "detect language" or one of the model's languages;
        - a result-count picker;
        - a drop zone: drop a photo there, or "choose a file";
        - a grid of result thumbnails, each with its rank, score and file name. Clicking a photo shows photos like
          it. After an upload, the captions of the collection that best describe the photo are listed above the grid.

        The address keeps the search: a text search becomes `/?q=…&lang=…&k=…` and a click for similar photos
        `/?similar=ID&k=…`, so a result page can be shared, reloaded, or reached again with Back and Forward. An
        uploaded photo cannot be put in an address, so an upload returns the address to the bare page.

        **Endpoints.** The OpenAPI schema is at `/openapi.json`. `/docs` is FastAPI's Swagger page, which loads its
        script from a CDN, so it needs a browser that is online.

        | method and path | what it does |
        |---|---|
        | `GET /api/health` | `{{"status": "ok", "photos": n, "captions": m}}` |
        | `GET /api/model` | languages, similarity, backbone, fingerprint, index structure and recall, caption collection, limits |
        | `POST /api/search/text` | JSON `{{"query", "lang" (code or "auto"), "k"}}` → photos |
        | `GET /api/search/text?q=&lang=&k=` | the same, for links and curl |
        | `POST /api/search/image` | multipart upload `file` (+ `k`) → photos like it |
        | `GET /api/photos/{{id}}/similar?k=` | photos like an indexed photo (itself left out) |
        | `POST /api/captions/image` | multipart upload `file` (+ `k`, `lang`) → captions of the collection |
        | `GET /api/photos/{{id}}/captions?k=&lang=` | captions for an indexed photo |
        | `GET /api/photos/{{id}}` | the photo file |
        | `GET /api/photos/{{id}}/thumbnail?size=` | a JPEG thumbnail ({THUMB_SIZES[0]}–{THUMB_SIZES[-1]} px, cached in memory) |

        The requests below were sent to the running service at `http://127.0.0.1:{port}` with httpx. Each shows the
        request (method, path and body), then the response's status and body. By hand, the first one is
        `curl -s -X POST http://127.0.0.1:{port}/api/search/text -H 'Content-Type: application/json' -d
        '{{"query": "{GERMAN}", "lang": "auto", "k": 3}}'`, and uploads are `curl -F file=@PHOTO -F k=3 ...`.
        """)
    photo_bytes = probe.read_bytes()
    body = {"query": GERMAN, "lang": "auto", "k": 3}
    _, text_lines = http.call("POST", "/api/search/text", json=body,
                              shown_request=f"POST /api/search/text  {json.dumps(body, ensure_ascii=False)}")
    params = {"q": "un homme fait du vélo", "lang": "fr", "k": 2}
    r, get_lines = http.call("GET", "/api/search/text", params=params)
    get_lines[0] = f"GET {r.request.url.raw_path.decode()}"
    _, img_lines = http.call(
        "POST", "/api/search/image", files={"file": (probe.name, photo_bytes, "image/jpeg")}, data={"k": "3"},
        shown_request=_multipart_shown("POST", "/api/search/image", probe.name, "image/jpeg", len(photo_bytes), k=3))
    _, cap_lines = http.call(
        "POST", "/api/captions/image", files={"file": (probe.name, photo_bytes, "image/jpeg")}, data={"k": "3"},
        shown_request=_multipart_shown("POST", "/api/captions/image", probe.name, "image/jpeg", len(photo_bytes),
                                       k=3))
    probe_id = next(p.id for p in PhotoIndex.open(work / "index").photos if Path(p.path) == probe)
    _, sim_lines = http.call("GET", f"/api/photos/{probe_id}/similar?k=2")
    _, pcap_lines = http.call("GET", f"/api/photos/{probe_id}/captions?k=2&lang=de")
    _, health_lines = http.call("GET", "/api/health", compact=True)
    _, model_lines = http.call("GET", "/api/model")
    _, thumb_lines = http.call("GET", f"/api/photos/{probe_id}/thumbnail")
    _, file_lines = http.call("GET", f"/api/photos/{probe_id}")
    blocks = [text_lines, get_lines, img_lines, cap_lines, sim_lines, pcap_lines, health_lines, model_lines,
              thumb_lines, file_lines]
    page.block([line for b in blocks for line in (*b, "")][:-1])

    # bad input
    bad = _bad_inputs(http, work, photo_bytes, probe)
    page.text("""
        **Bad input** gets a 4xx whose JSON `detail` says what is wrong. It never gets a 5xx, and it never gets a
        file from outside the index. Photos are served by index id only: no parameter takes a path, and a client's
        upload file name is used only in messages. Each request below is labelled with what is wrong with it:
        """)
    page.block([line for b in bad for line in (*b, "")][:-1])
    page.text("""
        The 413 comes before anything is read: the request's Content-Length is checked, and for chunked uploads the
        service stops reading at the cap. Status codes:

        - 404: an unknown photo id or route;
        - 413: a body over the cap;
        - 415: an upload declared as something other than an image;
        - 422: everything else.
        """)


def _bad_inputs(http: Http, work: Path, photo_bytes: bytes, probe: Path) -> list[list[str]]:
    from PIL import Image

    blocks = []

    def post_text(label, body, shown_body=None, expect=422):
        shown = f"POST /api/search/text  {shown_body or json.dumps(body, ensure_ascii=False)}"
        _, lines = http.call("POST", "/api/search/text", json=body, label=label, shown_request=shown, expect=expect,
                             compact=True)
        blocks.append(lines)

    def upload(label, name, data, ctype, expect=422):
        shown = _multipart_shown("POST", "/api/search/image", name, ctype, len(data))
        _, lines = http.call("POST", "/api/search/image", files={"file": (name, data, ctype)}, label=label,
                             shown_request=shown, expect=expect, compact=True)
        blocks.append(lines)

    post_text("empty query", {"query": "", "lang": "de"})
    post_text("10 kB query", {"query": "a" * 10240, "lang": "en"}, '{"query": "aaa…a" (10240 × "a"), "lang": "en"}')
    post_text("unknown language", {"query": "a dog", "lang": "xx"})
    post_text("language too short to detect", {"query": TOO_SHORT, "lang": "auto"})
    post_text("a language the model does not know", {"query": SPANISH, "lang": "auto"})
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
            ("path traversal, encoded", "GET /api/photos/..%2F..%2F..%2Fetc%2Fpasswd",
             b"/api/photos/..%2F..%2F..%2Fetc%2Fpasswd"),
            ("path traversal in the static files (raw path, not normalised by the client)",
             "GET /static/../../../../etc/passwd", b"/static/../../../../etc/passwd"),
            ("path traversal in the thumbnail route", "GET /api/photos/../../../etc/passwd/thumbnail",
             b"/api/photos/../../../etc/passwd/thumbnail")):
        r, lines = http.call("GET", "/", label=label, shown_request=shown, target=target,
                             expect=(400, 404, 422), compact=True)
        if b"root:" in r.content:
            raise WalkthroughError(f"{shown} served a file from outside the index")
        blocks.append(lines)
    _, lines = http.call("GET", "/api/photos/99999", label="unknown photo id", expect=404, compact=True)
    blocks.append(lines)
    return blocks


if __name__ == "__main__":
    sys.exit(main())
