"""quiet_stdout silences C-level writes to fd 1 (HiGHS' stray debug line) and restores stdout."""
import subprocess
import sys

SCRIPT = """
import ctypes, os
from sim.quiet import quiet_stdout
print("before", flush=True)
with quiet_stdout():
    os.write(1, b"from C\\n")
    ctypes.CDLL(None).printf(b"printf\\n")
    ctypes.CDLL(None).fflush(None)
print("after", flush=True)
"""


def test_quiet_stdout_drops_fd1_writes_and_restores():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["before", "after"]


def test_quiet_stdout_with_captured_stdout_is_a_no_op(capsys):
    from sim.quiet import quiet_stdout
    with quiet_stdout():
        print("kept")
    assert "kept" in capsys.readouterr().out
