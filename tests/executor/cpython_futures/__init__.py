"""CPython's own tests of ``concurrent.futures.Future``, ``wait`` and ``as_completed``, run against toolfork's
futures (``CallFuture``): from the interpreter's ``test`` package where it is installed, and from the copies
vendored here, which run on every interpreter (v310: CPython 3.10.13's; v313: CPython 3.13.0's), under the
PSF licence (LICENSE-PSF.txt). ``loader.py`` adapts them in one way only: how their futures are made."""
