"""``python -m toolfork``: the same command line as the ``toolfork`` script."""

from toolfork.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
