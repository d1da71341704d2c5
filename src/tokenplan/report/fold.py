"""Tables that fit any terminal width without splitting a number.

rich folds a cell that is narrower than its longest word mid-word, so at 80 or 110 columns a figure
such as ``53,738 (49,124–64,722)`` could be printed as ``53,73`` / ``8 (49,…``. A
:class:`FoldingTable` measures, at render time, the width each column needs so that no word
(a run of characters without a space) is cut: where the terminal gives that much, it prints the
usual table with each column at least that wide (cells wrap only at spaces); where it does not,
it prints the same cells stacked, one block per row, as ``header  value`` lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

_BORDER_PER_COLUMN = 3  # one vertical rule and one space of padding on each side
_BORDER_EDGE = 1  # the closing rule on the right


def _plain(cell: str | Text) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _longest_word(cell: str | Text) -> int:
    return max((len(word) for word in _plain(cell).split()), default=0)


class FoldingTable:
    """A table of text cells that wraps only at spaces, or stacks its rows when it cannot.

    Args:
        title: the table's title (may be empty).
        header: the column names, e.g. ``["option", "output tok/s", …]``.
        rows: one sequence of cells per row, as many as ``header``.
        right: the indices of right-aligned (numeric) columns.
    """

    def __init__(
        self, title: str, header: Sequence[str], rows: Iterable[Sequence[str | Text]], right: Iterable[int] = ()
    ) -> None:
        self.title, self.header, self.rows, self.right = title, list(header), [list(r) for r in rows], set(right)

    def min_widths(self) -> list[int]:
        """Per column, the width (characters) its longest word needs: header and every cell."""
        return [
            max([_longest_word(self.header[i])] + [_longest_word(r[i]) for r in self.rows])
            for i in range(len(self.header))
        ]

    def min_table_width(self) -> int:
        """The narrowest the side-by-side table can be without cutting a word (characters)."""
        return sum(self.min_widths()) + _BORDER_PER_COLUMN * len(self.header) + _BORDER_EDGE

    def fitted_widths(self, max_width: int) -> list[int]:
        """Per column, the width its text gets in a table ``max_width`` characters wide: each
        column's longest cell on one line where they all fit, else the widest columns narrowed a
        character at a time, never below their longest word (:meth:`min_widths`)."""
        widths = [
            max([len(_plain(self.header[i]))] + [len(_plain(r[i])) for r in self.rows]) for i in range(len(self.header))
        ]
        mins = self.min_widths()
        excess = sum(widths) + _BORDER_PER_COLUMN * len(widths) + _BORDER_EDGE - max_width
        while excess > 0:
            slack = [w - m for w, m in zip(widths, mins)]
            widest = max(range(len(widths)), key=lambda i: (slack[i] > 0, widths[i]))
            if slack[widest] <= 0:
                break  # every column at its longest word: min_table_width() > max_width
            widths[widest] -= 1
            excess -= 1
        return widths

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.min_table_width() <= options.max_width:
            yield self._side_by_side(self.fitted_widths(options.max_width))
        else:
            yield from self._stacked()

    def _side_by_side(self, widths: Sequence[int]) -> Table:
        # fixed widths: rich wraps each cell at spaces within them and never crops a column
        t = Table(title=self.title or None, header_style="bold")
        for i, (col, width) in enumerate(zip(self.header, widths)):
            t.add_column(col, justify="right" if i in self.right else "left", overflow="fold", width=width)
        for row in self.rows:
            t.add_row(*row)
        return t

    def _stacked(self) -> RenderResult:
        if self.title:
            yield Text(self.title, style="bold")
        for row in self.rows:
            t = Table(show_header=False, title=None, box=None, pad_edge=False, padding=(0, 2, 0, 0))
            t.add_column("field", style="bold", no_wrap=True)
            t.add_column("value", overflow="fold")
            for name, cell in zip(self.header, row):
                t.add_row(name, cell)
            yield t
            yield Text("")
