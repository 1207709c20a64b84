"""The frame every page of the results site shares (:mod:`reproduce.present.site`): its style, its head and the
navigation bar linking home, the claims ledger and the figures."""

from __future__ import annotations

import html


NAV_STYLE = """
nav.site-nav{position:sticky;top:0;background:#f4f6f8;border-bottom:1px solid #d0d7de;padding:.45em 1em;
font:14px system-ui,sans-serif;z-index:1000}
nav.site-nav a{margin-right:1em}
"""
STYLE = (
    NAV_STYLE
    + """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:0 auto;
padding:0 1.2em 3em;line-height:1.45;color:#1b1b1b}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #d0d7de;padding:.3em .55em;vertical-align:top}
th{background:#f4f6f8}
tr:target{background:#fff3b0}
[id]{scroll-margin-top:3em}
figure{display:inline-block;margin:.6em;max-width:480px;vertical-align:top}
figure img{max-width:100%;height:auto;border:1px solid #e1e4e8}
figcaption{font-size:13px;color:#444}
code{background:#f4f6f8;padding:0 .2em}
"""
)


def page_head(title: str, depth: int = 0) -> str:
    up = "../" * depth
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>'
        f"<body>{nav(up)}\n"
    )


def nav(up: str, extra: str = "") -> str:
    return (
        f'<nav class="site-nav"><a href="{up}index.html">coherent_itr results</a>'
        f'<a href="{up}ledger.html">claims ledger</a><a href="{up}figures.html">figures</a>{extra}</nav>'
    )
