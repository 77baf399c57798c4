"""Call polyvse's HTTP API from Python: ask a running `polyvse serve` for photos by text and by photo.

    polyvse serve --index runs/demo/index --port 8000 &
    python examples/http_api.py --url http://127.0.0.1:8000 --query "a dog runs on the beach" --lang en

A server started with --token (or $POLYVSE_TOKEN) wants it on every request: this script sends $POLYVSE_TOKEN
when it is set. The full schema is at <url>/docs (and <url>/openapi.json).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import requests


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default %(default)s)")
    ap.add_argument("--query", required=True, help="what the photo shows")
    ap.add_argument("--lang", default="auto", help="the query's language (ISO 639 code), or auto to detect it")
    ap.add_argument("--photo", help="also search by this photo file")
    ap.add_argument("-k", type=int, default=5, help="how many photos to show")
    ap.add_argument("--save-thumbnail", metavar="FILE", help="write the best match's thumbnail (JPEG) here")
    args = ap.parse_args(argv)

    api = requests.Session()
    if os.environ.get("POLYVSE_TOKEN"):
        api.headers["Authorization"] = f"Bearer {os.environ['POLYVSE_TOKEN']}"

    def call(method: str, path: str, **kw) -> requests.Response:
        r = api.request(method, args.url + path, timeout=60, **kw)
        if not r.ok:  # 4xx answers carry {"detail": "what is wrong"}
            raise SystemExit(f"{method} {path}: {r.status_code} {r.text}")
        return r

    model = call("GET", "/api/model").json()
    served = ", ".join(f"{lang['code']} ({lang['status']})" for lang in model["served_languages"])
    print(f"{model['index']['photos']} photos; languages: {served}")

    found = call("POST", "/api/search/text", json={"query": args.query, "lang": args.lang, "k": args.k}).json()
    print(f"{args.query!r} ({found['lang']}), {found['took_ms']:.0f} ms:")
    for hit in found["results"]:
        print(f"  {hit['rank']}. {hit['score']:.3f}  {hit['name']}  {args.url}{hit['url']}")

    if args.photo:  # a multipart upload, as a browser's file input sends it
        with open(args.photo, "rb") as fh:
            like = call(
                "POST",
                "/api/search/image",
                files={"file": (Path(args.photo).name, fh, "image/jpeg")},
                data={"k": str(args.k)},
            ).json()
        print(f"photos like {args.photo}: " + ", ".join(h["name"] for h in like["results"]))
    if args.save_thumbnail and found["results"]:
        Path(args.save_thumbnail).write_bytes(call("GET", found["results"][0]["thumbnail"]).content)
    return found


if __name__ == "__main__":
    main()
