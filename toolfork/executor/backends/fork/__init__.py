"""The fork backend: warm forked workers, and the one set of rules for what happens to them.

One module a moving part, read from the top::

    pool.ForkBackend ─┐  (the calls of every batch, through the Hub)      two clients: which item goes
    lane.LineLane ────┤  (the raw lines of one ``toolfork run`` job)       to which idle worker, when
                      ▼
    core.WorkerCore   the workers, the idle set, the selector, the quick/slow estimate, deadlines and
                      the fault rules (timeout, crash, damaged channels, requeue) once, for both
                      │ call pipe / result pipe per worker (frames: ``toolfork.executor.wire``)
    template_link     the host's end of the template's control socket: spawn, stop, liveness, end
                      │ fork
    template          the single-threaded process that forks every worker and reaps them
                      │ fork
    worker            the worker loop: before_child, the tool, after_child, one frame a result;
    reset             what a warm worker puts back between calls (signal state, timers, children)
"""
