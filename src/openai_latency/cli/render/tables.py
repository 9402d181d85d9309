"""Rows of cells -> aligned text or Markdown (the first row is the header, the first column the label)."""

from __future__ import annotations

Rows = list[list[str]]


def table(rows: Rows, indent: str = "  ") -> list[str]:
    """Aligned columns: the label column left, the others right, three spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    result = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)
        ]
        result.append((indent + "   ".join(cells)).rstrip())
    return result


def markdown_table(rows: Rows) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.strip().replace("|", "\\|") for c in cells) + " |"

    return [line(rows[0]), "|" + "---|" * len(rows[0]), *(line(r) for r in rows[1:])]
