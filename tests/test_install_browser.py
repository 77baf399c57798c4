"""`make test` installs headless Chromium for the browser test (scripts/install-browser.sh): a no-op when it is
there, apt-get when it is not, a clear refusal when it cannot. Run against stub commands on a private PATH, so
nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install-browser.sh"
BASH = shutil.which("bash")


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!" + BASH + "\n" + body + "\n")
    path.chmod(0o755)


def _run(bin_dir: Path) -> subprocess.CompletedProcess:
    env = {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run([BASH, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def _bin(tmp_path: Path, *, uid: int, chromium: bool = False) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "id", f"echo {uid}")
    log = tmp_path / "apt.log"
    # apt-get "installs" chromium by writing a stub of it, and logs what it was asked
    _stub(
        bin_dir,
        "apt-get",
        f'echo "$*" >> {log}\n'
        f"if [ \"$1\" = install ]; then printf '#!{BASH}\\necho Chromium 1.0\\n' > {bin_dir}/chromium; "
        f"{shutil.which('chmod')} +x {bin_dir}/chromium; fi",
    )
    if chromium:
        _stub(bin_dir, "chromium", "echo Chromium 1.0")
    return bin_dir


def test_present_chromium_is_a_no_op(tmp_path):
    proc = _run(_bin(tmp_path, uid=1000, chromium=True))
    assert proc.returncode == 0 and "already installed (Chromium 1.0)" in proc.stdout
    assert not (tmp_path / "apt.log").exists()


def test_missing_chromium_is_installed_with_apt_get_as_root(tmp_path):
    proc = _run(_bin(tmp_path, uid=0))
    assert proc.returncode == 0, proc.stderr
    assert "installed Chromium 1.0" in proc.stdout
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert calls[0].startswith("update") and calls[1].startswith("install") and calls[1].endswith(" chromium")
    again = _run(tmp_path / "bin")  # a second run finds it
    assert again.returncode == 0 and "already installed" in again.stdout
    assert len((tmp_path / "apt.log").read_text().splitlines()) == 2


def test_not_root_and_no_sudo_says_so(tmp_path):
    proc = _run(_bin(tmp_path, uid=1000))
    assert proc.returncode == 1
    assert "not root and no sudo" in proc.stderr and "install the Debian package 'chromium'" in proc.stderr
    assert not (tmp_path / "apt.log").exists()


def test_no_apt_get_says_so(tmp_path):
    bin_dir = _bin(tmp_path, uid=0)
    (bin_dir / "apt-get").unlink()
    proc = _run(bin_dir)
    assert proc.returncode == 1 and "no apt-get here" in proc.stderr


def test_make_test_runs_the_installer_before_pytest_and_goes_on_without_it():
    recipe = subprocess.run(
        ["make", "-n", "-B", "test"], cwd=REPO, capture_output=True, text=True, timeout=60
    ).stdout.splitlines()
    install = [i for i, line in enumerate(recipe) if "scripts/install-browser.sh" in line]
    pytest_line = [i for i, line in enumerate(recipe) if "-m pytest" in line]
    assert install and pytest_line and install[0] < pytest_line[0]
    assert "||" in recipe[install[0]]  # a failed install does not stop the rest of the suite
