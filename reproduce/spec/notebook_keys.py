"""The notebook check of the label map: which raw metric keys (``cs100_i2t_true``) a notebook's outputs still show
instead of their labels (:func:`reproduce.spec.labels.label`)."""

from __future__ import annotations

import json
from pathlib import Path

from reproduce.spec.labels import _TOKEN, is_metric_key  # the one word grammar in_text replaces keys by

_TEXT_MIMES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml")


def _output_texts(output: dict):
    if output.get("output_type") == "stream":
        yield "".join(output.get("text", ""))
    for mime in _TEXT_MIMES:
        v = output.get("data", {}).get(mime)
        if v is not None:
            yield "".join(v) if isinstance(v, list) else str(v)
    if output.get("output_type") == "error":
        yield "\n".join(output.get("traceback", []))


def raw_metric_keys_in(notebook_path) -> list[str]:
    """Sorted raw metric keys (e.g. ``cs100_i2t_true``) found in the text *outputs* of a notebook's
    code cells (streams, tables as text/HTML/Markdown, SVG text, tracebacks). Code and Markdown
    sources are not scanned; PNG figures cannot be (check their labels where they are drawn)."""
    path = Path(notebook_path)
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a notebook (invalid JSON at line {e.lineno}: {e.msg})") from None
    found = set()
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            for t in _output_texts(o):
                found.update(tok for tok in _TOKEN.findall(t) if is_metric_key(tok))
    return sorted(found)


__all__ = ["raw_metric_keys_in"]
