"""A plot's items by key, created on first use and kept (hidden) across sweeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.gui.plots.items import TopLegend


def _legend(owner: Any) -> TopLegend | None:
    legend = getattr(owner, "legend", None)
    return legend if isinstance(legend, TopLegend) else None


class ItemPool:
    """One plot's items, created on first use and reused by key (one pool per plot: ``owner`` is that plot).

    ``retire`` (a new sweep) hides every item and takes its legend entry out, keeping both: the next draw that asks
    for the same key shows them again instead of building a new item and legend label (a plot's first draw of a
    sweep built 5-10 of them, 1-2 ms each). An item's name can differ between sweeps (another model, profile or
    KV type): callers pass ``name`` wherever it can. ``clear`` removes everything.
    """

    def __init__(self) -> None:
        self.items: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        self.spare: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        self.stale: dict[tuple[Any, ...], tuple[Any, Any]] = {}  # retired: hidden, legend entries still laid out
        self._entry_due: dict[tuple[Any, ...], str] = {}  # spares whose legend entry is still to be built

    def get(self, owner: Any, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        hit = self.items.get(key)
        if hit is not None:
            return hit[1]
        hit = self.stale.pop(key, None)
        if hit is not None:  # retired and asked for again before :meth:`settle`: its legend entry never left
            hit[1].show()
            self.items[key] = hit
            return hit[1]
        spare = self.spare.pop(key, None)
        if spare is not None:
            item = spare[1]
            item.show()
            legend = _legend(owner)
            name = self._entry_due.pop(key, None)
            if legend is not None and name is not None:
                legend.addItem(item, name)  # asked for before its stashed entry was built
            elif legend is not None:
                legend.unstash(item)
            self.items[key] = spare
            return item
        item = make()
        owner.addItem(item)
        self.items[key] = (owner, item)
        return item

    def remove(self, key: tuple[Any, ...]) -> None:
        hit = self.items.pop(key, None) or self.stale.pop(key, None)
        if hit is None:
            self._entry_due.pop(key, None)
            hit = self.spare.pop(key, None)
            legend = _legend(hit[0]) if hit is not None else None
            if legend is not None:
                legend.discard(hit[1])
        if hit is not None:
            hit[0].removeItem(hit[1])

    def make_spare(self, owner: Any, key: tuple[Any, ...], make: Callable[[], Any],
                   later: Callable[[Callable[[], None]], None] | None = None) -> bool:
        """Build the item for ``key`` ahead of its first use, hidden (False if there is one already); with ``later``
        (which queues a callable), its stashed legend entry is built by a piece of its own (the two: up to 11 ms)."""
        if key in self.items or key in self.spare or key in self.stale:
            return False
        item = make()
        item.hide()
        name = item.name() if hasattr(item, "name") else None
        legend = _legend(owner)
        if name and legend is not None:
            item.opts["name"] = None  # added without a legend entry (laying the legend out again: 5-8 ms) ...
            owner.addItem(item)
            item.opts["name"] = name
            if later is None:
                legend.add_stashed(item, name)  # ... and given one kept out, as a parked item's is
            else:
                self._entry_due[key] = name
                later(lambda: self._stash_entry(key))
        else:
            owner.addItem(item)
        self.spare[key] = (owner, item)
        return True

    def _stash_entry(self, key: tuple[Any, ...]) -> None:
        """Build a spare's stashed legend entry (not if the spare was taken or removed meanwhile)."""
        name = self._entry_due.pop(key, None)
        spare = self.spare.get(key)
        legend = _legend(spare[0]) if spare is not None else None
        if name is not None and spare is not None and legend is not None:
            legend.add_stashed(spare[1], name)

    def park(self, key: tuple[Any, ...]) -> None:
        """Hide one item and its legend entry, kept for the next ``get`` of its key (an item that comes and goes
        within a sweep, such as the repetitions of the test running: built once, not once per test)."""
        self._park([key])

    def retire(self) -> None:
        """Hide every item, kept for the next ``get`` of its key; :meth:`settle` (after the next draw) takes the
        legend entries of those not asked for again out. A new sweep of the same models asks for the same items, so
        their entries never leave the legend and it is not laid out twice (the first draw of a sweep took 15 ms)."""
        for key, hit in self.items.items():
            hit[1].hide()
            self.stale[key] = hit
        self.items.clear()

    def settle(self) -> bool:
        """Park the retired items the last draw did not ask for (their legend entries out); True if any."""
        keys = list(self.stale)
        self._park(keys)
        return bool(keys)

    def _park(self, keys: list[tuple[Any, ...]]) -> None:
        legends: list[TopLegend] = []
        for key in keys:
            hit = self.items.pop(key, None) or self.stale.pop(key, None)
            if hit is None:
                continue
            owner, item = hit
            item.hide()
            legend = _legend(owner)
            if legend is not None and legend.stash(item) and legend not in legends:
                legends.append(legend)
            self.spare[key] = hit
        for legend in legends:
            legend.relayout()

    def clear(self) -> None:
        for key in [*self.spare, *self.items, *self.stale]:
            self.remove(key)
