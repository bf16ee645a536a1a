"""Sub-commands of ``clustersim``; one module each, discovered by sim.cli."""
