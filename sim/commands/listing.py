"""``clustersim presets`` and ``clustersim policies``."""
from __future__ import annotations


from . import help_line
from ._options import add_policy_file_option, load_policy_files


def register(sub) -> None:
    sub.add_parser("presets", help=help_line("presets")).set_defaults(func=_presets)
    p = sub.add_parser("policies", help=help_line("policies"))
    add_policy_file_option(p)
    p.set_defaults(func=_policies)


def _presets(args) -> None:
    from ..presets import list_presets
    for name, desc in list_presets().items():
        print(f"{name:12s} {desc}")


def _policies(args) -> None:
    from ..policies import list_policies
    load_policy_files(args.policy_file)
    for name, desc in list_policies().items():
        print(f"{name:12s} {desc}")
