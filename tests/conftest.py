"""Hypothesis profiles.

``ci`` (the default) draws the same examples on every run, so the suite passes or fails the
same way on every machine; ``explore`` draws new examples each run and is how we hunt for new
counterexamples (``pytest --hypothesis-profile=explore``).  A counterexample found that way is
pinned with ``@example`` in its test.
"""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("CLUSTERSIM_HYPOTHESIS_PROFILE", "ci"))
