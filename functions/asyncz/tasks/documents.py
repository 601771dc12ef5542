"""Small, dependency-free renderers used by the example tasks: an RFC 5322 email and a PDF."""

from __future__ import annotations

from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime


def render_email(*, to: str, subject: str, body: str, message_id: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "AsyncZ <no-reply@asyncz.invalid>"
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = format_datetime(datetime.now(UTC))
    msg["Message-ID"] = f"<{message_id}@asyncz.invalid>"
    msg.set_content(body)
    return msg.as_bytes()


def _pdf_text(text: str) -> str:
    # PDF string literals escape backslash and parentheses; keep Latin-1 only.
    safe = text.encode("latin-1", "replace").decode("latin-1")
    return safe.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def render_pdf(title: str, lines: list[str], lines_per_page: int = 48) -> tuple[bytes, int]:
    """A valid PDF 1.4 (Helvetica text pages); returns (bytes, page count)."""
    body = [title, "", *lines]
    pages = [body[i : i + lines_per_page] for i in range(0, len(body), lines_per_page)] or [[]]
    objects: list[bytes] = []
    font_id = 3
    page_ids: list[int] = []
    content: list[tuple[int, bytes]] = []
    next_id = 4
    for page in pages:
        ops = ["BT", "/F1 11 Tf", "14 TL", "56 790 Td"]
        ops += [f"({_pdf_text(line)}) '" for line in page]
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        page_ids.append(next_id)
        content.append((next_id + 1, stream))
        next_id += 2
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(page_ids)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for cid, stream in content:
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents {cid} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out), len(pages)
