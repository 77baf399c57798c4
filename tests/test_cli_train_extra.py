"""A command that needs a package of the [train] extra (torch above all) in an install without it says which command,
what it needs and the pip line, with exit code 2 and no traceback (polyvse_app.cli.run); a missing module the extra
does not provide stays an error of its own."""

from __future__ import annotations

import argparse

import pytest

from polyvse_app.cli import command_name, run
from test_onnx_encoder import without_torch


def _parser(missing: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="polyvse")
    sub = parser.add_subparsers(dest="command", required=True)
    model = sub.add_parser("model").add_subparsers(dest="model_command", required=True)

    def fail(args):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    model.add_parser("build").set_defaults(func=fail)
    return parser


@pytest.mark.parametrize(
    "missing, what",
    [("torch", "PyTorch"), ("torch.nn", "PyTorch"), ("torchvision", "torchvision"), ("sacrebleu", "sacrebleu")],
)
def test_a_missing_train_package_is_one_line_naming_the_command(missing, what, capsys):
    assert run(_parser(missing), ["model", "build"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"polyvse: error: polyvse model build needs {what}, which the light install leaves out: "
        "pip install 'polyvse[train]'\n"
    )


def test_another_missing_module_is_not_dressed_up():
    with pytest.raises(ModuleNotFoundError, match="no_such_package"):
        run(_parser("no_such_package"), ["model", "build"])


def test_command_name_takes_the_action():
    assert command_name(argparse.Namespace(command="export", export_format="onnx")) == "export onnx"
    assert command_name(argparse.Namespace(command="train")) == "train"


@pytest.mark.parametrize(
    "argv, command",
    [
        (["train", "--config", "smoke", "--out", "run"], "train"),
        (
            ["rerank", "--checkpoint", "c", "--nbest", "n", "--images-list", "i", "--references", "r", "--lang", "de"],
            "rerank",
        ),
    ],
)
def test_without_torch_a_torch_command_says_how_to_install_it(argv, command, tmp_path):
    proc = without_torch(*argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"polyvse {command} needs PyTorch" in proc.stderr and "pip install 'polyvse[train]'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()
