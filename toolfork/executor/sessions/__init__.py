"""Sessions: a state built once by a factory, and the calls that run against it in order.

Why a folder: everything a session is on the host side lives here, the rules every session shares
(``session.py``: order, admission and finishing through ``CallBook``, counting, tracing, lost or
restored) and the capability a backend offers for it (``place.py``: ``SessionSpec`` in,
``SessionPlace`` out). Where a session's state lives is each backend's to say, and that code stays in
its backend like the rest of its internals: fork's ``backends/fork/session_link.py`` (the host's end of
a session process) and ``session_worker.py`` (the sessions' supervisor and the session process),
sequential's ``HostPlace``, Ray's actor session.

    Executor.session ──SessionSpec──> Backend.open_session ──> SessionPlace
    Session.run ── each call ──> CallBook.admit ──> SessionPlace.call ──> CallBook.finish
"""
