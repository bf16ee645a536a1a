"""clustersim: a fast, calibrated simulator of shared GPU clusters and their schedulers.

From a notebook::

    import sim
    result = sim.simulate("gavel-108", jobs, "tiresias")       # a SimResult
    table = sim.compare("gavel-108", "generate", ["fifo", "tiresias"], seeds=[0, 1], jobs=200)

``sim.simulate`` and ``sim.compare`` (:mod:`sim.api`) and ``sim.__version__`` load on first use,
so ``import sim`` itself imports nothing heavy.
"""
from importlib import import_module

__all__ = ["simulate", "compare", "__version__"]


def __getattr__(name: str):
    if name in ("simulate", "compare"):
        value = getattr(import_module(".api", __name__), name)
    elif name == "__version__":
        value = import_module("._version", __name__).version()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
