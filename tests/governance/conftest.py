

def pytest_collection_modifyitems(items: list) -> None:
    """These tests fork children that must run one thread (a namespace or a Landlock domain binds only
    the calling thread). A library another test used can leave an at-fork hook that starts a thread in
    every child of that pytest worker; run these first, before any other test has run in the worker."""
    items.sort(key=lambda item: "/tests/governance/" not in str(item.path))
