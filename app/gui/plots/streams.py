"""A plotted series that grows as its events arrive: its points, where its line starts again, and whether its item
shows all of it yet (PyMeasure's way: append, then one ``setData`` per refresh of what changed)."""

from __future__ import annotations

import numpy as np

from app.run.live import Series


class Stream:
    """x, y, a line-start flag and a tag (e.g. the test index) per point; ``dirty`` until :meth:`shown`."""

    def __init__(self) -> None:
        self.x, self.y, self.starts, self.tags = Series(), Series(), Series(), Series()
        self.dirty = False

    def __len__(self) -> int:
        return len(self.x)

    def extend(self, x: np.ndarray, y: np.ndarray, starts: np.ndarray | None = None,
               tags: np.ndarray | None = None) -> None:
        """Append points (``starts``: 1.0 where a line starts again; ``tags``: one number per point)."""
        if len(x) == 0:
            return
        self.x.extend(x)
        self.y.extend(y)
        self.starts.extend(np.zeros(len(x)) if starts is None else starts)
        self.tags.extend(np.full(len(x), -1.0) if tags is None else tags)
        self.dirty = True

    def clear(self) -> None:
        for s in (self.x, self.y, self.starts, self.tags):
            s.clear()
        self.dirty = True

    def connect(self) -> np.ndarray:
        """pyqtgraph's connect array: point i joins i+1 unless i+1 starts a line again."""
        starts = self.starts.view()
        if starts.size == 0:
            return np.zeros(0, dtype=bool)
        return np.append(starts[1:] < 0.5, False)

    def shown(self) -> None:
        self.dirty = False
