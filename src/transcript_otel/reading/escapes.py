"""Text made safe to show: what an agent printed, as it may reach a terminal or a document.

A transcript holds whatever the agent and its tools printed, escape sequences included; a
name (a path, a run) may hold them too. Shown as they are, they would act on the reader's
terminal: `visible` and `visible_name` show each control character as an escape instead.
"""

from __future__ import annotations

from typing import Final

# What a terminal acts on instead of showing: C0 controls but tab and newline (escape
# sequences, carriage returns, bells, backspaces), DEL, and the C1 controls.
_CONTROLS: Final = {
    **{code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F) if chr(code) not in "\t\n"},
    **{code: f"\\u{code:04x}" for code in range(0x80, 0xA0)},
    ord("\r"): "\\r",
}


def visible(text: str) -> str:
    """`text` as it may reach a terminal or a document: control characters shown as escapes
    (`\\x1b[2J`, `\\r`), so that what an agent printed cannot clear, retitle or overwrite
    the screen of whoever reads its transcript."""
    return text.translate(_CONTROLS)


# A name on one line: tabs and newlines shown as escapes too.
_NAME_CONTROLS: Final = {**_CONTROLS, ord("\t"): "\\t", ord("\n"): "\\n"}


def visible_name(name: object) -> str:
    """A path or other name as one line of a message: every control character shown as an
    escape (a folder may be named `proj\\x1b[2J\\nfake line`)."""
    return str(name).translate(_NAME_CONTROLS)
