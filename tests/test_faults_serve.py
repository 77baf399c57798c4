"""`polyvse index add` while `polyvse serve` is under load: no request fails while the index switches generations
(the old version's files are deleted under requests that still read them), and the added photos are found once the
add is done, without a restart. The server is real uvicorn on loopback; the add is a `polyvse index add` process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx

from test_browser import uvicorn_thread
from test_index import N_FIRST, assets  # noqa: F401 (fixture)

CLIENTS = 6


def test_index_add_under_load_fails_no_request_and_serves_the_new_photos(assets, tmp_path):  # noqa: F811
    from polyvse_app.service import ServeSettings, build_app

    root = shutil.copytree(assets.index, tmp_path / "index")
    app, _, _ = build_app(root, settings=ServeSettings(reload_interval_s=0), device="cpu")
    statuses, failures, stop = Counter(), [], threading.Event()
    query = {"query": assets.english_query, "lang": "en", "k": 20}
    upload = assets.photos[1].read_bytes()

    def client(url: str, i: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    if n % 4 == 0:
                        r = http.post(
                            "/api/search/image", files={"file": ("q.jpg", upload, "image/jpeg")}, data={"k": "5"}
                        )
                    elif n % 4 == 1:
                        r = http.get(f"/api/photos/{(i + n) % N_FIRST}/thumbnail", params={"size": 64})
                    elif n % 4 == 2:
                        r = http.get(f"/api/photos/{(i * 7 + n) % N_FIRST}/similar", params={"k": 5})
                    else:
                        r = http.post("/api/search/text", json=query)
                except httpx.HTTPError as exc:
                    failures.append(repr(exc))
                    continue
                statuses[r.status_code] += 1
                if r.status_code != 200:
                    failures.append(f"{r.request.method} {r.request.url}: {r.status_code} {r.text[:200]}")

    with uvicorn_thread(app) as url:
        threads = [threading.Thread(target=client, args=(url, i), daemon=True) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(2)  # load before the add
        add = subprocess.run(
            [
                sys.executable,
                "-m",
                "polyvse_app.cli",
                "index",
                "add",
                "--index",
                str(root),
                "--images",
                str(assets.photos_dir),
                "--cache-dir",
                str(assets.cache_dir),
                "--quiet",
                "--device",
                "cpu",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert add.returncode == 0, add.stderr
        time.sleep(2)  # load after it
        stop.set()
        for t in threads:
            t.join(60)
        with httpx.Client(base_url=url, timeout=60) as http:
            health = http.get("/api/health").json()
            new = assets.photos[-1]
            top = http.post(
                "/api/search/image", files={"file": ("q.jpg", new.read_bytes(), "image/jpeg")}, data={"k": "1"}
            ).json()["results"][0]
    assert not failures, failures[:5]
    assert statuses[200] > 50, statuses
    assert health["photos"] == len(assets.photos)
    assert top["name"] == new.name and top["id"] >= N_FIRST
