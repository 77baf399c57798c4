"""`polyvse adapt` killed with SIGKILL (no handler runs, no file is closed) resumes with --resume to the same new
language part, bit for bit, as a run that was never stopped. The kill lands at a random moment after the second
epoch's state was written: inside an epoch, or inside the next state's write."""

from __future__ import annotations

import random
import signal
import subprocess
import sys

import numpy as np

import polyvse
from polyvse.adaptation.adapt import state_path_of
from polyvse_app.cli import main
from test_adapt import base_checkpoint, es_pairs  # noqa: F401 (fixtures)

EPOCHS = 12
# `polyvse adapt` with each epoch's state save followed by a pause and a line on stdout, so the test can kill it
# after a given epoch at a moment of its choosing
SLOW_SAVES = """
import sys, time
import polyvse.adaptation.teacher as teacher
from polyvse_app.cli import main

real = teacher.save_training_state

def save_and_say(state, path):
    real(state, path)
    print(f"saved {state['epoch']}", flush=True)
    time.sleep(0.2)

teacher.save_training_state = save_and_say
sys.exit(main(sys.argv[1:]))
"""


def adapt_args(checkpoint, pairs, out) -> list[str]:
    return [
        "adapt",
        "--checkpoint",
        str(checkpoint),
        "--lang",
        "es",
        "--parallel",
        str(pairs),
        "--out",
        str(out),
        "--epochs",
        str(EPOCHS),
        "--batch-size",
        "64",
        "--quiet",
    ]


def test_adapt_killed_minus_9_resumes_to_the_same_result(base_checkpoint, es_pairs, tmp_path):  # noqa: F811
    whole = tmp_path / "whole"
    assert main(adapt_args(base_checkpoint, es_pairs, whole)) == 0
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_SAVES, *adapt_args(base_checkpoint, es_pairs, out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:
            if line.strip() == "saved 2":
                break
        else:
            raise AssertionError(f"the run ended before its second epoch: {proc.wait()} {proc.stderr.read()}")
        # a moment inside the pause, the next epoch or the next save
        import time

        time.sleep(random.Random().uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(60)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert state_path_of(out).is_file() and not out.exists()  # stopped: only its state is there
    assert main([*adapt_args(base_checkpoint, es_pairs, out), "--resume"]) == 0
    assert not state_path_of(out).exists()  # removed once the checkpoint is written
    sentences = ["un perro corre en la playa", "dos niños juegan al fútbol"]
    np.testing.assert_array_equal(
        polyvse.load(whole).encode_text(sentences, "es"), polyvse.load(out).encode_text(sentences, "es")
    )
