"""Sub-commands of ``clustersim``; one module each, named in :data:`COMMANDS`.

sim.cli imports only the module of the command being run (``run``'s imports numpy, scipy and
Numba) and lists the others by their one-line help, so ``clustersim --help`` stays quick.
"""
from __future__ import annotations

#: command -> (its module in this package, the line ``clustersim --help`` gives it), in that order
COMMANDS = {
    "calibrate": ("calibrate", "fit Pollux/Sia and Hops step-time models; write calib.toml"),
    "collect": ("collect", "time real training steps with PyTorch and write a measurement trace"),
    "presets": ("listing", "list cluster presets"),
    "policies": ("listing", "list scheduling policies (built-in, installed, and from files)"),
    "run": ("run", "run policies side by side (no arguments: the default scenario)"),
    "sweep": ("sweep", "run a sweep spec (TOML grid of simulations) into a Parquet dataset"),
    "trace": ("trace", "inspect (stats) or convert public cluster traces"),
}


def help_line(command: str) -> str:
    """The one-line help of ``command``."""
    return COMMANDS[command][1]
