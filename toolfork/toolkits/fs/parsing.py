"""Text out of HTML (BeautifulSoup) and PDF (pypdf), from bytes already read (bounded) by the caller.

Both libraries are the ``files`` extra and are imported only when a file of their kind is parsed.
"""

import io

from .errors import FileSystemError

__all__ = ["html_text", "pdf_text"]


def pdf_text(data: bytes, name: str) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:  # pragma: no cover - extra not installed
        raise FileSystemError("PDF support needs pypdf: pip install 'toolfork[files]'") from None
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise FileSystemError(f"{name} is an encrypted PDF; its text cannot be extracted")
        pages = [page.extract_text() or "" for page in reader.pages]
    except PdfReadError as exc:
        raise FileSystemError(f"{name} is not a readable PDF: {exc}") from None
    if len(pages) == 1:
        return pages[0].strip()
    return "\n\n".join(f"--- page {i} ---\n{text.strip()}" for i, text in enumerate(pages, start=1))


def html_text(data: bytes) -> str:
    try:
        from bs4 import BeautifulSoup
    except ImportError:  # pragma: no cover - extra not installed
        raise FileSystemError("HTML support needs beautifulsoup4: pip install 'toolfork[files]'") from None
    soup = BeautifulSoup(data, "html.parser")
    for node in soup(["script", "style", "noscript", "template"]):
        node.decompose()
    title = soup.title.get_text(strip=True) if soup.title else ""
    body = soup.body or soup
    lines = [line.strip() for line in body.get_text("\n").splitlines()]
    text = "\n".join(line for line in lines if line)
    return f"{title}\n\n{text}" if title and not text.startswith(title) else text
