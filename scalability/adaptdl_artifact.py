"""Read files of the Pollux artifact (petuum/adaptdl, branch osdi21-artifact) from a git
directory (e.g. the mirror that ``fetch github:petuum/adaptdl`` makes), without a work tree."""
from __future__ import annotations

import json
import subprocess

BRANCH = "osdi21-artifact"


def artifact_text(gitdir: str, path: str) -> str:
    """The text of ``simulator/<path>`` on the artifact branch (``git show``)."""
    return subprocess.run(["git", "--git-dir", gitdir, "show", f"{BRANCH}:simulator/{path}"],
                          check=True, capture_output=True, text=True).stdout


def artifact_summary(gitdir: str, folder: str) -> dict:
    """``simulator/<folder>/summary.json`` of the artifact: {"avgs": workload -> avg JCT,
    "jcts": workload -> job -> JCT, ...}."""
    return json.loads(artifact_text(gitdir, f"{folder}/summary.json"))
