"""User text on a page is shown as text, never interpreted as Markdown.

Streamlit renders Markdown — with its ``:color[…]``/``:material/…:`` directives and ``$…$`` math — in
``st.markdown``, ``st.write`` of a string, ``st.caption``, titles and headers, ``st.info``/``success``/
``warning``/``error``, widget labels and ``help``. A run named ``![t](http://host/track.png)`` shown
there makes every browser that opens the page fetch that URL. :func:`markdown_text` backslash-escapes every ASCII
punctuation character (CommonMark allows any of them to be escaped, and the directives and math are
parsed after the escapes), so the text reads exactly as it was typed. Use it for names, tags, device
names, config keys and error messages that quote them — never inside backticks, where escapes show.
Tables (``st.dataframe``) and option lists show plain text already.
"""

from __future__ import annotations

import string

_ESCAPED = frozenset(string.punctuation)


def markdown_text(text: object) -> str:
    """``text`` as a Markdown fragment that renders literally (line breaks become spaces)."""
    out = []
    for ch in str(text):
        if ch in _ESCAPED:
            out.append("\\" + ch)
        elif ch in "\r\n":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)
