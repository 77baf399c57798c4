"""Load test of `polyvse serve` on loopback: N concurrent clients for a bounded time and request count.

    python benchmarks/bench_serve_load.py --index runs/demo/index --out runs/bench_serve_load.json
    python benchmarks/bench_serve_load.py --url http://127.0.0.1:8000 --out load.json   # a running server

Starts the server itself (uvicorn, 127.0.0.1, a free port) unless --url is given (loopback only), waits
until it is healthy, then runs --clients concurrent clients (default 50) for --duration seconds (default
30) or --max-requests requests in all, whichever comes first, and stops by itself. The request mix
follows what the web page does: text queries in each of the model's languages (explicit and auto),
thumbnails, similar photos by id, model info, and some photo uploads. Every response must be a 2xx:
errors are counted and listed. Prints and writes (--out, JSON) the request rate and latency percentiles
(p50/p90/p99/max), overall and per request kind. Exit code 1 if any request failed. Not a test.

A soak: a longer --duration with --add-images DIR runs `polyvse index add` on the served index halfway through
(the server picks the new generation up without a restart; the record says when the new photos were seen), and
the server's resident memory is sampled every --rss-every seconds (start, middle and end in the record):

    python benchmarks/bench_serve_load.py --index runs/model/index --duration 600 --clients 8 \
        --add-images photos-to-add/ --out benchmarks/results/soak_product.json
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from polyvse_tooling.harness import LOOPBACK, ServerError, free_port, start_serve, stop_serve, wait_until_up

QUERIES = {
    "en": [
        "a dog runs through the snow",
        "two children are playing on the beach",
        "a man rides a bicycle",
        "a girl in a pink dress is jumping",
        "people walking down a city street",
    ],
    "de": [
        "zwei Hunde spielen im Schnee",
        "ein Mann fährt Fahrrad",
        "Kinder spielen am Strand",
        "ein Mädchen in einem rosa Kleid",
        "ein Hund läuft durch das Gras",
    ],
    "fr": ["deux chiens jouent dans la neige", "un homme fait du vélo", "des enfants jouent sur la plage"],
    "cs": ["dva psi si hrají na sněhu", "muž jede na kole", "děti si hrají na pláži"],
    "zh": ["两只狗在雪地里玩", "一个男人骑自行车", "孩子们在海滩上玩"],
    "ja": ["雪の中で遊ぶ二匹の犬", "自転車に乗る男性"],
    # the languages `make model` adapts (MultiScript30k training lines, no evaluation photo's)
    "es": ["Un hombre sonríe a un león de peluche", "Dos niños se sientan en un pequeño columpio en la arena."],
    "ar": ["رجل يبتسم إلى أسد محشو", "طفلين صغيرين بالخارج على العشب"],
    "qu": ["Uj niña, kʼullpi wasiman wicharikushan.", "Uj runa uj leónta rikuspa sonqota chʼichin."],
    "gn": ["Mitãkuña'i ojupi peteĩ óga yvyrágui.", "Heta kuña oha'ãrõ okápe peteĩ távape."],
}
# kind -> weight; uploads are the expensive ones (the CNN backbone runs on every one)
MIX = {"text": 45, "text_auto": 10, "thumbnail": 25, "similar": 10, "model": 3, "health": 2, "upload": 5}


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary(latencies_s: list[float]) -> dict:
    xs = sorted(latencies_s)
    ms = lambda v: round(v * 1000, 2)  # noqa: E731
    return {
        "n": len(xs),
        "p50_ms": ms(percentile(xs, 0.50)),
        "p90_ms": ms(percentile(xs, 0.90)),
        "p99_ms": ms(percentile(xs, 0.99)),
        "max_ms": ms(xs[-1]) if xs else None,
        "mean_ms": ms(sum(xs) / len(xs)) if xs else None,
    }


def check_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise SystemExit(f"--url must point at this machine's loopback (127.0.0.0/8, ::1, localhost), not {host!r}")


def rss_bytes(pid: int) -> int | None:
    """Resident memory of a process (Linux /proc), None where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


async def sample_rss(
    pid: int, every_s: float, finished: asyncio.Event, samples: list[tuple[float, int]], t0: float, deadline: float
) -> None:
    while time.perf_counter() < deadline or not finished.is_set():
        rss = rss_bytes(pid)
        if rss is not None:
            samples.append((round(time.perf_counter() - t0, 1), rss))
        await asyncio.sleep(every_s)


def rss_summary(samples: list[tuple[float, int]], duration: float) -> dict:
    """Start (first sample), middle (nearest the half) and end (last sample) RSS, and the peak."""
    if not samples:
        return {"samples": []}
    mid = min(samples, key=lambda s: abs(s[0] - duration / 2))
    gib = lambda b: round(b / 2**30, 3)  # noqa: E731
    return {
        "start_gib": gib(samples[0][1]),
        "middle_gib": gib(mid[1]),
        "end_gib": gib(samples[-1][1]),
        "peak_gib": gib(max(b for _, b in samples)),
        "samples": [[t, gib(b)] for t, b in samples],
    }


async def add_midway(args, client, url: str, t0: float, before: int, finished: asyncio.Event) -> dict:
    """At half the duration, `polyvse index add` of --add-images into the served index; then poll the server
    until it reports the new photo count (no restart). The load goes on until ``finished`` is set, past the
    duration when the add takes longer."""
    try:
        return await _add_and_wait(args, client, url, t0, before)
    finally:
        finished.set()


async def _add_and_wait(args, client, url: str, t0: float, before: int) -> dict:
    await asyncio.sleep(args.duration / 2)
    cmd = [
        sys.executable,
        "-m",
        "polyvse_app",
        "index",
        "add",
        "--index",
        str(args.index),
        "--images",
        str(args.add_images),
        "--quiet",
    ]
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    done = time.perf_counter()
    seen_at, photos = None, before
    while proc.returncode == 0 and time.perf_counter() < done + ADD_SEEN_WITHIN_S:
        photos = (await client.get(url + "/api/model")).json()["index"]["photos"]
        if photos > before:
            seen_at = round(time.perf_counter() - t0, 1)
            break
        await asyncio.sleep(1.0)
    return {
        "command": " ".join(["polyvse", *cmd[3:]]),
        "exit_code": proc.returncode,
        "started_s": round(started - t0, 1),
        "seconds": round(done - started, 1),
        "photos_before": before,
        "photos_after": photos,
        "new_photos_served_at_s": seen_at,
        "output_tail": out.decode(errors="replace")[-800:] if proc.returncode else "",
    }


#: how long after `index add` exits the server may take to serve the new generation (its reload check runs every
#: few seconds)
ADD_SEEN_WITHIN_S = 60.0


def start_server(args) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = ["--index", args.index, "--host", LOOPBACK, "--port", port, "--log-level", "warning"]
    if args.checkpoint:
        cmd += ["--checkpoint", args.checkpoint]
    if args.captions:
        cmd += ["--captions", args.captions]
    log = open(args.server_log, "w") if args.server_log else subprocess.DEVNULL
    return start_serve(cmd, log), f"http://{LOOPBACK}:{port}"


async def wait_healthy(url: str, proc, timeout: float) -> None:
    try:
        await asyncio.to_thread(wait_until_up, proc, url, timeout)
    except ServerError as exc:
        raise SystemExit(f"the server at {url} was not ready: {exc}") from None


async def plan(client, url: str, upload_photo: Path | None) -> dict:
    """What to send: accepted queries per language, photo ids, an upload (checked once before the run)."""
    info = (await client.get(url + "/api/model")).json()
    n_photos = info["index"]["photos"]
    text, auto = [], []
    for lang in info["languages"]:
        for q in QUERIES.get(lang, []):
            r = await client.post(url + "/api/search/text", json={"query": q, "lang": lang, "k": 12})
            if r.status_code == 200:
                text.append((q, lang))
                r = await client.post(url + "/api/search/text", json={"query": q, "lang": "auto", "k": 12})
                if r.status_code == 200:
                    auto.append(q)
    if not text:
        raise SystemExit("the server accepted none of the benchmark queries; is the index's model trained?")
    photo = None
    if upload_photo is not None:
        photo = (upload_photo.name, upload_photo.read_bytes())
    else:  # one of the indexed photos, fetched through the API (the only way to get one)
        r = await client.get(url + "/api/photos/0")
        if r.status_code == 200:
            photo = ("photo.jpg", r.content)
    return {"n_photos": n_photos, "text": text, "auto": auto, "photo": photo, "info": info}


async def run_load(args) -> dict:
    import httpx

    proc = None
    rss_samples: list[tuple[float, int]] = []
    url = args.url
    if url:
        check_loopback(url)
    else:
        proc, url = start_server(args)
    # Idle pooled connections expire on the client before the server's keep-alive timeout (polyvse serve: 15 s),
    # so a request never goes out on a connection the server is closing at that moment (a ReadError race).
    limits = httpx.Limits(
        max_connections=args.clients + 5, max_keepalive_connections=args.clients + 5, keepalive_expiry=2.0
    )
    try:
        async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as client:
            t_ready = time.time()
            await wait_healthy(url, proc, args.startup_timeout)
            ready_s = time.time() - t_ready
            setup = await plan(client, url, args.upload)
            mix = dict(MIX)
            if not setup["auto"]:
                mix.pop("text_auto")
            if setup["photo"] is None:
                mix.pop("upload")
            kinds, weights = zip(*mix.items())
            records: list[tuple[str, float, int, str]] = []  # kind, seconds, status, error
            load_before = os.getloadavg()
            state = {"sent": 0}
            t_start = time.perf_counter()
            deadline = t_start + args.duration

            async def one(kind: str, rng: random.Random):
                if kind == "text":
                    q, lang = rng.choice(setup["text"])
                    return await client.post(url + "/api/search/text", json={"query": q, "lang": lang, "k": 12})
                if kind == "text_auto":
                    return await client.post(
                        url + "/api/search/text", json={"query": rng.choice(setup["auto"]), "lang": "auto", "k": 12}
                    )
                if kind == "thumbnail":
                    return await client.get(f"{url}/api/photos/{rng.randrange(setup['n_photos'])}/thumbnail")
                if kind == "similar":
                    return await client.get(f"{url}/api/photos/{rng.randrange(setup['n_photos'])}/similar?k=12")
                if kind == "model":
                    return await client.get(url + "/api/model")
                if kind == "health":
                    return await client.get(url + "/api/health")
                name, data = setup["photo"]
                return await client.post(
                    url + "/api/search/image", files={"file": (name, data, "image/jpeg")}, data={"k": "12"}
                )

            side, add_finished = [], asyncio.Event()
            if args.add_images:
                side.append(add_midway(args, client, url, t_start, setup["n_photos"], add_finished))
            else:
                add_finished.set()
            if proc is not None:
                side.insert(0, sample_rss(proc.pid, args.rss_every, add_finished, rss_samples, t_start, deadline))

            def going() -> bool:
                return (time.perf_counter() < deadline or not add_finished.is_set()) and state[
                    "sent"
                ] < args.max_requests

            async def worker(i: int):
                rng = random.Random(args.seed * 1000 + i)
                while going():
                    state["sent"] += 1
                    kind = rng.choices(kinds, weights)[0]
                    t0 = time.perf_counter()
                    try:
                        r = await one(kind, rng)
                        err = "" if 200 <= r.status_code < 300 else f"HTTP {r.status_code}: {r.text[:200]}"
                        records.append((kind, time.perf_counter() - t0, r.status_code, err))
                    except Exception as exc:  # noqa: BLE001 - a failed request is a result here
                        records.append((kind, time.perf_counter() - t0, 0, f"{type(exc).__name__}: {exc}"))

            done = await asyncio.gather(*(worker(i) for i in range(args.clients)), *side)
            index_add = done[-1] if args.add_images else None
            duration = time.perf_counter() - t_start
            wall = time.perf_counter() - t_start
            load_after = os.getloadavg()
    finally:
        if proc is not None:
            stop_serve(proc, timeout=20)

    errors = [r for r in records if r[3]]
    per_kind = {}
    for kind in kinds:
        lat = [r[1] for r in records if r[0] == kind and not r[3]]
        per_kind[kind] = {**summary(lat), "errors": sum(1 for r in errors if r[0] == kind)}
    ok_lat = [r[1] for r in records if not r[3]]
    return {
        "benchmark": "bench_serve_load",
        "url": url if args.url else "127.0.0.1 (started by the benchmark)",
        "clients": args.clients,
        "duration_s": args.duration,
        "max_requests": args.max_requests,
        "wall_s": round(wall, 2),
        "server_ready_s": round(ready_s, 2),
        "requests": len(records),
        "errors": len(errors),
        "error_samples": [{"kind": k, "status": s, "error": e} for k, _, s, e in errors[:10]],
        "requests_per_s": round(len(records) / wall, 1) if wall else None,
        "latency": summary(ok_lat),
        "per_kind": per_kind,
        "mix": mix,
        "index": {
            "photos": setup["n_photos"],
            "kind": setup["info"]["index"]["kind"],
            "languages": setup["info"]["languages"],
        },
        "queries": {"text": len(setup["text"]), "auto": len(setup["auto"])},
        "server_rss": rss_summary(rss_samples, duration) if proc is not None else None,
        "index_add": index_add,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_1min_before": round(load_before[0], 2),
            "load_average_1min_after": round(load_after[0], 2),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--index", type=Path, help="index folder: the benchmark starts `polyvse serve` on it")
    src.add_argument("--url", help="an already running server on loopback, e.g. http://127.0.0.1:8000")
    ap.add_argument("--checkpoint", type=Path, help="checkpoint for the started server (default: the index's)")
    ap.add_argument("--captions", type=Path, help="caption collection for the started server")
    ap.add_argument("--out", required=True, type=Path, help="JSON file for the results")
    ap.add_argument("--clients", type=int, default=50, help="concurrent clients (default: %(default)s)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load (default: %(default)s)")
    ap.add_argument("--max-requests", type=int, default=200_000, help="stop after this many requests in all")
    ap.add_argument("--timeout", type=float, default=60.0, help="per-request timeout in seconds")
    ap.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for the server")
    ap.add_argument("--upload", type=Path, help="photo to upload (default: indexed photo 0, fetched via the API)")
    ap.add_argument("--server-log", type=Path, help="write the started server's output here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--add-images",
        type=Path,
        metavar="DIR",
        help="photos to `polyvse index add` into the served index halfway through (needs --index)",
    )
    ap.add_argument("--rss-every", type=float, default=5.0, help="seconds between the server's RSS samples")
    args = ap.parse_args(argv)
    if args.add_images and not args.index:
        raise SystemExit("--add-images needs --index (the benchmark adds into the index it serves)")
    if not 1 <= args.clients <= 1000 or not 0 < args.duration <= 600 or args.max_requests < 1:
        raise SystemExit("--clients must be 1..1000, --duration 0..600 s, --max-requests at least 1")

    result = asyncio.run(run_load(args))
    from polyvse.provenance import index_model, no_model, provenance

    result["provenance"] = provenance(
        model=index_model(args.index, args.checkpoint)
        if args.index
        else no_model(f"a server already running at {args.url}: the load test does not see its model")
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lat = result["latency"]
    print(
        f"{result['requests']} requests in {result['wall_s']} s from {result['clients']} clients "
        f"({result['requests_per_s']}/s), {result['errors']} errors"
    )
    print(
        f"latency (ok requests): p50 {lat['p50_ms']} ms · p90 {lat['p90_ms']} ms · p99 {lat['p99_ms']} ms · "
        f"max {lat['max_ms']} ms"
    )
    for kind, s in result["per_kind"].items():
        print(
            f"  {kind:10s} n={s['n']:6d}  p50 {s['p50_ms']:8} ms  p90 {s['p90_ms']:8} ms  p99 {s['p99_ms']:8} ms"
            f"  errors {s['errors']}"
        )
    for e in result["error_samples"]:
        print(f"  error: {e}")
    if result["server_rss"] and result["server_rss"].get("samples"):
        r = result["server_rss"]
        print(
            f"server RSS: {r['start_gib']} GiB at start, {r['middle_gib']} middle, {r['end_gib']} end "
            f"(peak {r['peak_gib']})"
        )
    if result["index_add"]:
        a = result["index_add"]
        print(
            f"index add at {a['started_s']} s: exit {a['exit_code']}, {a['seconds']} s, photos "
            f"{a['photos_before']} -> {a['photos_after']}, served from {a['new_photos_served_at_s']} s"
        )
    m = result["machine"]
    print(
        f"machine: {m['cpus']} CPUs, 1-min load average {m['load_average_1min_before']} before, "
        f"{m['load_average_1min_after']} after (client and server share this machine)"
    )
    print(f"written to {args.out}")
    add_failed = result["index_add"] is not None and (
        result["index_add"]["exit_code"] != 0 or result["index_add"]["new_photos_served_at_s"] is None
    )
    return 1 if result["errors"] or add_failed else 0


if __name__ == "__main__":
    sys.exit(main())
