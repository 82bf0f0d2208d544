#!/usr/bin/env python
"""Run the benchmark suite: same options as `toolfork bench` (see docs/bench.md).

python bench/run.py --quick                  # about a minute; files in a cache directory
python bench/run.py --out bench/results      # full run, refreshing the committed results
"""

import os
import sys

# From a checkout without `pip install -e .`, find the package next to this folder.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from toolfork.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
