"""The Pollux job model and goodput (algorithms.md §5.5, §5.6; docs/goodput.md).

* :mod:`.profiles`  an application's measured profile (step times, gradient statistics, epochs)
* :mod:`.goodput`   throughput x statistical efficiency, batch-size optimization, speedup tables
* :mod:`.oracle`    :class:`GoodputOracle`, the throughput oracle of Pollux-model workloads
* :mod:`.jobmodel`  :class:`JobModel`, the per-run job state: epochs, batch configurations and
                    the measured goodput that policies hand the engine as ``Plan.rate_scale``
* :mod:`.workload`  Pollux/Sia workload CSVs -> (JobTable, GoodputOracle)
"""
