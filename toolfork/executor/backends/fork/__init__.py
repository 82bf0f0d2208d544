"""The fork pool's core, host side: the template link (``template_link``) and what the pool and the
line lane share. ``fork_pool.ForkBackend`` and ``fork_lines.LineLane`` are its clients."""
