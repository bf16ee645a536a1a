"""asv benchmarks (see asv.conf.json); a package so asv can import them."""
