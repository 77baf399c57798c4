"""The languages table: every language a checkpoint serves, scored as search ranks it, from a record of
`scripts/language_table.py` (results/languages-model.json)."""

from __future__ import annotations

from polyvse.evaluation.report import markdown_rows

from .records import Page

RECORD = "results/languages-model.json"


def _cell(row: dict, split: str) -> str:
    if split not in row:
        return "-"
    return f"{row[split]['mr']:.1f}" + (f" ± {row[split]['mr_sd']:.1f}" if "mr_sd" in row[split] else "")


def languages_markdown(record: dict, link: str | None = None, chosen: dict[str, str] | None = None) -> str:
    """The table of a languages record: one row per served language with val and test mR and gallery size."""
    from polyvse.evaluation.languages import served_as
    from polyvse.languages import language_name

    head = ["code", "language", "served as", "captions", "val mR", "test mR", "test photos"]
    body = [
        [
            name,
            language_name(r["lang"]),
            served_as(r),
            r["captions"],
            _cell(r, "val"),
            _cell(r, "test"),
            str(r["test"]["n_images"]) if "test" in r else "-",
        ]
        for name, r in record["rows"].items()
    ]
    where = record.get("provenance", record)
    machine = where.get("machine")
    if isinstance(machine, dict):  # the provenance block's
        machine = f"{machine.get('cpu')}, {machine.get('cores')} cores, GPU {machine.get('gpu') or 'none'}"
    splits = "/".join(record.get("splits", ["val", "test"]))
    text = (
        f"`{record['checkpoint']}` (config `{record['config']}`), Flickr8K official {splits} photos; mR = mean "
        f"of R@1/5/10 both ways, ranked as search ranks; record {link or '`' + record['out'] + '`'} "
        f"({str(where.get('date'))[:10]}, {machine}).\n\n" + markdown_rows(head, body)
    )
    text += _taught_note(record, chosen or {})
    adapted = sorted({r["from"] for r in record["rows"].values() if r.get("from")})
    if adapted:
        text += (
            "\nAdapted rows are served by the checkpoint `polyvse adapt` writes, not by the model itself; "
            f"their figures come from {', '.join(f'`{a}`' for a in adapted)}. Their method and size were "
            "chosen in adaptation rounds whose test scores were computed too, so their test figures are not "
            "an untouched held-out estimate (the decisions log says which rounds looked at test).\n"
        )
    return text


def _taught_note(record: dict, chosen: dict[str, str]) -> str:
    """What the rows of languages the checkpoint itself was taught after training say about their choice: the
    plan's own words where ``chosen`` (language -> the plan's ``chosen``) has them, else the record's copy."""
    taught = {name: r for name, r in record["rows"].items() if r.get("taught")}
    if not taught:
        return ""
    by_choice: dict[str, list[str]] = {}
    for name, r in taught.items():
        why = chosen.get(r.get("lang", name)) or r.get("chosen") or "not recorded"
        by_choice.setdefault(why, []).append(name)
    plan = f" (`{record['plan']}`)" if record.get("plan") else ""
    return (
        "\nAdapted rows are served by this checkpoint: `make model` teaches them after training"
        + plan
        + ", each by `polyvse adapt` from MultiScript30k lines outside every evaluation, the old languages' "
        "vectors and the photo index unchanged. How each was chosen: "
        + "; ".join(f"{', '.join(names)}: {why}" for why, names in by_choice.items())
        + ". The test figures of this record were computed once, for this model, after those choices.\n"
    )


def plan_choices(page: Page, record: dict) -> dict[str, str]:
    """language -> how the adaptation plan the record names says it was chosen ({} without a readable plan)."""
    from polyvse.adaptation.plan import read_plan
    from polyvse.errors import DataError

    path = page.repo / record["plan"] if record.get("plan") else None
    if path is None or not path.is_file():
        return {}
    try:
        return {e.lang: e.chosen for e in read_plan(path).entries if e.chosen}
    except DataError:
        return {}


def languages_block(page: Page) -> str:
    record = page.read(RECORD)
    return languages_markdown(record, page.record_link(RECORD), plan_choices(page, record)).rstrip("\n")
