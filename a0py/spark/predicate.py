"""Predicate pushdown: the conjunction of filters the reader applies
itself (topic, seq, publish time), and what it proves about a chunk from
its index and ``a0py.chunks`` ranges.

Invariant: a predicate only ever removes rows that fail it: chunks are
skipped only when their ranges prove that no row in them can pass, and the
rows read are then filtered exactly, so a read with pushdown returns the
same rows as one without.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Predicate:
    """A conjunction the reader applies exactly: topic in ``topics``, seq in
    [``seq_lo``, ``seq_hi``] (and in ``seq_in``), ``time_wall`` in
    [``wall_lo``, ``wall_hi``] (µs since the epoch). ``None`` = no bound.
    ``empty`` = nothing can pass."""

    topics: frozenset | None = None
    seq_lo: int | None = None
    seq_hi: int | None = None
    seq_in: frozenset | None = None
    wall_lo: int | None = None
    wall_hi: int | None = None
    empty: bool = False

    def and_topics(self, topics):
        t = frozenset(topics)
        return _replace(self, topics=t if self.topics is None else self.topics & t)

    def and_seq(self, lo=None, hi=None, values=None):
        p = self
        if lo is not None:
            p = _replace(p, seq_lo=lo if p.seq_lo is None else max(p.seq_lo, lo))
        if hi is not None:
            p = _replace(p, seq_hi=hi if p.seq_hi is None else min(p.seq_hi, hi))
        if values is not None:
            v = frozenset(values)
            p = _replace(p, seq_in=v if p.seq_in is None else p.seq_in & v)
        return p

    def and_wall(self, lo=None, hi=None):
        p = self
        if lo is not None:
            p = _replace(p, wall_lo=lo if p.wall_lo is None else max(p.wall_lo, lo))
        if hi is not None:
            p = _replace(p, wall_hi=hi if p.wall_hi is None else min(p.wall_hi, hi))
        return p

    def topic_ok(self, topic):
        return not self.empty and (self.topics is None or topic in self.topics)

    def seq_range_ok(self, lo, hi):
        """Can a row with lo <= seq <= hi pass?"""
        if self.empty or (self.seq_lo is not None and hi < self.seq_lo) or (
                self.seq_hi is not None and lo > self.seq_hi):
            return False
        if self.seq_in is not None:
            return any(lo <= v <= hi for v in self.seq_in)
        return True

    def wall_range_ok(self, lo_us, hi_us):
        return not (self.empty or (self.wall_lo is not None and hi_us < self.wall_lo)
                    or (self.wall_hi is not None and lo_us > self.wall_hi))

    def seq_mask(self, seq):
        m = np.ones(len(seq), bool)
        if self.seq_lo is not None:
            m &= seq >= self.seq_lo
        if self.seq_hi is not None:
            m &= seq <= self.seq_hi
        if self.seq_in is not None:
            m &= np.isin(seq, np.fromiter(self.seq_in, np.int64, len(self.seq_in)))
        return m

    def wall_mask(self, wall_us, valid=None):
        m = np.ones(len(wall_us), bool) if valid is None else valid.copy()
        if self.wall_lo is not None:
            m &= wall_us >= self.wall_lo
        if self.wall_hi is not None:
            m &= wall_us <= self.wall_hi
        if (self.wall_lo is not None or self.wall_hi is not None) and valid is not None:
            m &= valid
        return m


def _replace(p, **kw):
    d = {k: getattr(p, k) for k in Predicate.__dataclass_fields__}
    d.update(kw)
    q = Predicate(**d)
    empty = q.empty or (q.topics is not None and not q.topics) or (
        q.seq_lo is not None and q.seq_hi is not None and q.seq_lo > q.seq_hi) or (
        q.seq_in is not None and not q.seq_in) or (
        q.wall_lo is not None and q.wall_hi is not None and q.wall_lo > q.wall_hi)
    if empty and not q.empty:
        d.update(kw, empty=True)
        q = Predicate(**d)
    return q
