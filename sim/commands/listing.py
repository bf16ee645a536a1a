"""``clustersim presets`` and ``clustersim policies``."""
from __future__ import annotations


def register(sub) -> None:
    sub.add_parser("presets", help="list cluster presets").set_defaults(func=_presets)
    sub.add_parser("policies", help="list scheduling policies").set_defaults(func=_policies)


def _presets(args) -> None:
    from ..presets import list_presets
    for name, desc in list_presets().items():
        print(f"{name:12s} {desc}")


def _policies(args) -> None:
    from ..policies import list_policies
    for name, desc in list_policies().items():
        print(f"{name:12s} {desc}")
