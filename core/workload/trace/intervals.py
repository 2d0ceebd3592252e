"""Unions of time intervals, the one way every trace figure merges them: a running latest end, where an interval
that begins past it starts a new merged one. Times before a trace's origin are negative (the origin is its first
timed event in file order, not its earliest), so no end is assumed ≥ 0."""

from __future__ import annotations

import numpy as np


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as disjoint ones, sorted: (starts, ends); empty stays empty."""
    if not len(start):
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    last = np.append(new[1:], True)  # the last interval of each merged one
    return s[new], reach[last]


def union_gaps(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gaps of the union of intervals given sorted by start: each gap's start and end, and the index of the
    interval that ends it (the first to start after it)."""
    reach = np.maximum.accumulate(e)
    opener = np.flatnonzero(s[1:] > reach[:-1]) + 1
    return reach[opener - 1], s[opener], opener


def merged_by_group(
    s: np.ndarray, rank: np.ndarray, ends: np.ndarray, group: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each group's intervals merged, all groups at once: (group, start, end) of every merged interval. Given
    sorted by group (dense, from 0) then start, each end as its rank in ``ends`` (sorted, distinct): the running
    latest end restarts at each group as the running maximum of the ends' ranks offset by the group (ranks, not
    times, so the offset cannot overflow whatever the times)."""
    if not len(s):
        return group, s, s
    reach = ends[np.maximum.accumulate(group * len(ends) + rank) - group * len(ends)]
    new = np.ones(len(s), bool)
    new[1:] = (group[1:] != group[:-1]) | (s[1:] > reach[:-1])
    last = np.append(new[1:], True)
    return group[new], s[new], reach[last]


def merged_groups(group: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`merged_by_group` of intervals in any order, ``group`` dense from 0."""
    order = np.lexsort((s, group))
    ends, rank = np.unique(e[order], return_inverse=True)
    return merged_by_group(s[order], rank, ends, group[order])
