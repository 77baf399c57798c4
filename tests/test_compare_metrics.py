"""scripts/compare_metrics.py: equal runs compare equal; a changed figure or a missing run fails, naming it."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_metrics.py"
spec = importlib.util.spec_from_file_location("compare_metrics", SCRIPT)
compare_metrics = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_metrics)


def _run(root: Path, name: str, t2i_r1: float, wall: float) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "metrics.json").write_text(
        json.dumps({"languages": {"en": {"t2i_r1": t2i_r1}}, "wall_time_s": wall, "config": {"name": name}})
    )


def test_same_runs_pass_and_a_changed_figure_or_missing_run_fails(tmp_path, capsys):
    before, after = tmp_path / "before", tmp_path / "after"
    _run(before, "a", 10.0, 1.0)
    _run(after, "a", 10.0, 2.0)  # wall time and config are not compared
    assert compare_metrics.main([str(before), str(after)]) == 0
    _run(before, "b", 5.0, 1.0)
    _run(after, "b", 5.5, 1.0)
    _run(before, "c", 1.0, 1.0)
    assert compare_metrics.main([str(before), str(after)]) == 1
    out = capsys.readouterr().out
    assert "b: DIFFERS: languages.en.t2i_r1: 5.0 != 5.5" in out and "c: missing after" in out
