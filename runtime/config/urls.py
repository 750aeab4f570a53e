"""Store URLs in messages: a password never shows."""

from __future__ import annotations

import re


def redact_url(url: str) -> str:
    """``url`` with any password (``user:pw@`` or ``password=pw``) replaced by ``***``."""
    url = re.sub(r"(://[^/@?#:]*):[^/?#]*@", r"\1:***@", url, count=1)
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", url)
