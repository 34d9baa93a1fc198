"""An MkDocs hook: a mention of a docs page in a page's text (``docs/formats.md``,
``docs/paper-a-linear-ntp.md#setting``, as docstrings write them, readable in ``help()``) becomes a link to that page
of the site. Mentions inside a link or a heading, and of files that are no page, stay as written."""

from __future__ import annotations

import re

MENTION = re.compile(r"(<code>)?docs/([\w/-]+\.md)(#[\w-]+)?(</code>)?")
PIECES = re.compile(r"(<[^>]+>)")


def on_page_content(html, page, config, files):
    out, inside = [], 0  # inside: open <a> and heading elements
    for piece in PIECES.split(html):
        if piece.startswith("<"):
            if re.match(r"<(a|h[1-6])[\s>]", piece):
                inside += 1
            elif re.match(r"</(a|h[1-6])>", piece):
                inside = max(inside - 1, 0)
            out.append(piece)
        elif inside:
            out.append(piece)
        else:
            out.append(MENTION.sub(lambda m: _link(m, page, files), piece))
    return "".join(out)


def _link(match, page, files):
    target = files.get_file_from_path(match[2])
    if target is None or not target.is_documentation_page():
        return match[0]
    url = target.url_relative_to(page.file) + (match[3] or "")
    return f'<a href="{url}">{match[0]}</a>'
