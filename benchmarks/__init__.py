"""The benchmarks behind tools/bench-*: the stdio and HTTP round trips beside their floor
and peers, and the memory measurements. Figures go to book/maintainers/measurements.md."""
