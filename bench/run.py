#!/usr/bin/env python
"""Run the benchmark suite: same options as `toolfork bench` (see docs/bench.md).

python bench/run.py --quick            # under two minutes
python bench/run.py                    # full run, results in bench/results/
"""

import os
import sys

# From a checkout without `pip install -e .`, find the package next to this folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from toolfork.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if not any(a == "--out" or a.startswith("--out=") for a in args):
        args += ["--out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")]
    sys.exit(main(["bench", *args]))
