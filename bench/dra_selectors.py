"""CEL device-selector speed: compile and evaluate through karpui's wrapper (common-expression-language).

Usage: python bench/dra_selectors.py [--iterations N]. If cel-python (celpy) is importable, the same expression is timed
with it too, for the comparison behind the library choice.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner.dra import cel as wrapper
from provisioner.dra.cel import Device, compile_selector, matches

EXPRESSION = (
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100" '
    '&& device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'
)
DEVICE = Device.from_spec(
    {"name": "gpu-0", "attributes": {"model": {"string": "a100"}}, "capacity": {"memory": {"value": "80Gi"}}},
    "gpu.example.com",
)


def timed(label: str, iterations: int, work) -> None:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    for _ in range(iterations):
        work()
    per = (time.perf_counter() - start) / iterations
    print(f"{label:<48}{per * 1e6:>10.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20000)
    args = parser.parse_args()
    assert matches(EXPRESSION, DEVICE)
    timed("compile (uncached, common-expression-language)", 2000, lambda: wrapper.cel.compile(EXPRESSION))
    timed("compile (karpui cache hit)", args.iterations, lambda: compile_selector(EXPRESSION))
    timed("evaluate full DRA selector (karpui wrapper)", args.iterations, lambda: matches(EXPRESSION, DEVICE))
    try:
        import celpy  # type: ignore[import-not-found]
    except ImportError:
        print("celpy not installed: pip install cel-python to compare")
        return
    environment = celpy.Environment()
    program = environment.program(environment.compile('device.driver == "gpu.example.com"'))
    activation = {"device": celpy.json_to_cel({"driver": "gpu.example.com"})}
    timed("evaluate driver equality (celpy)", max(args.iterations // 20, 100), lambda: program.evaluate(activation))


if __name__ == "__main__":
    main()
