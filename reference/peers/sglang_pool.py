"""SGLang 0.5.23 token-to-KV allocators and the request-to-token table (docs/peers/sglang.md §7).

Slots are plain ints. Invariant of both allocators: ``available_size()`` counts the slots that are free
or staged for release; slot 0 (page 0) is never handed out. Neither allocator guards a double free,
exactly as SGLang does not; the pool-partition checks of the profile detect one.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvexact.reference.peers.sglang_key import SGLangError, SGLangRejection


class TokenToKVPoolAllocator:
    """Page size 1: ``free_pages`` starts as ``1..size``; alloc takes from the front, free appends."""

    page_size = 1

    def __init__(self, size_slots: int, need_sort: bool = False):
        self.size_slots = size_slots
        self.need_sort = need_sort
        self.clear()

    def clear(self) -> None:
        self.free_pages: list[int] = list(range(1, self.size_slots + 1))
        self.release_pages: list[int] = []
        self._group: list[int] | None = None
        self.freed_log: list[tuple[int, ...]] | None = None  # set to a list to record each free call

    def available_size(self) -> int:
        return len(self.free_pages) + len(self.release_pages)

    def merge_and_sort_free(self) -> None:
        """0.5.23: merge the staged pages into the free list and sort it; with nothing staged the free list
        keeps its order (an alloc that runs short with ``need_sort`` off does not sort it)."""
        if not self.release_pages:
            return
        self.free_pages = sorted(self.free_pages + self.release_pages)
        self.release_pages = []

    def alloc(self, need_slots: int) -> list[int] | None:
        """The first ``need_slots`` free slots, or None when there are not enough."""
        if self.need_sort and need_slots > len(self.free_pages):
            self.merge_and_sort_free()
        if need_slots > len(self.free_pages):
            return None
        out, self.free_pages = self.free_pages[:need_slots], self.free_pages[need_slots:]
        return out

    def free(self, slots: Sequence[int]) -> None:
        if not len(slots):
            return
        if self._group is not None:
            self._group.extend(slots)
            return
        if self.freed_log is not None:
            self.freed_log.append(tuple(slots))
        if self.need_sort:
            self.release_pages.extend(slots)
        else:
            self.free_pages.extend(slots)

    def free_segment(self, slots: Sequence[int], start_pos: int = 0) -> None:
        """Free a segment that starts at logical position ``start_pos`` (which must be page-aligned)."""
        if start_pos % self.page_size:
            raise SGLangError(SGLangRejection.PAGE_MISALIGNED_SEGMENT,
                              f"start_pos {start_pos} with page size {self.page_size}")
        self.free(slots)

    def free_group_begin(self) -> None:
        self._group = []

    def free_group_end(self) -> None:
        group, self._group = self._group or [], None
        self.free(group)


class PagedTokenToKVPoolAllocator(TokenToKVPoolAllocator):
    """Page size > 1: page ids ``1..size//page_size``; free releases every page a freed slot touches.

    Released pages go to the front of the free list (reused first) unless ``need_sort`` stages them.
    """

    def __init__(self, size_slots: int, page_size: int, need_sort: bool = False):
        if page_size < 1:
            raise SGLangError(SGLangRejection.BAD_PAGE_SIZE, f"page_size={page_size}")
        self.page_size = page_size  # type: ignore[misc]
        super().__init__(size_slots, need_sort)

    def clear(self) -> None:
        self.free_pages = list(range(1, self.size_slots // self.page_size + 1))
        self.release_pages = []
        self._group = None
        self._page_group: list[int] | None = None
        self.freed_log = None

    def available_size(self) -> int:
        return (len(self.free_pages) + len(self.release_pages)) * self.page_size

    def alloc(self, need_slots: int) -> list[int] | None:
        if need_slots % self.page_size:
            raise SGLangError(SGLangRejection.PAGE_MISALIGNED_ALLOC,
                              f"alloc({need_slots}) with page size {self.page_size}")
        need_pages = need_slots // self.page_size
        if need_pages > len(self.free_pages):
            self.merge_and_sort_free()
        if need_pages > len(self.free_pages):
            return None
        pages, self.free_pages = self.free_pages[:need_pages], self.free_pages[need_pages:]
        return [p * self.page_size + i for p in pages for i in range(self.page_size)]

    def free(self, slots: Sequence[int]) -> None:
        """Release the sorted unique pages touched by ``slots`` (torch.unique sorts)."""
        if not len(slots):
            return
        if self._group is not None:
            self._group.extend(slots)
            return
        if self.freed_log is not None:
            self.freed_log.append(tuple(slots))
        self._release_pages(sorted({s // self.page_size for s in slots}))

    def free_segment(self, slots: Sequence[int], start_pos: int = 0) -> None:
        """Release a page-aligned segment's pages in segment order (one slot per page, no dedup)."""
        if start_pos % self.page_size:
            raise SGLangError(SGLangRejection.PAGE_MISALIGNED_SEGMENT,
                              f"start_pos {start_pos} with page size {self.page_size}")
        if not len(slots):
            return
        if self.freed_log is not None and self._group is None:
            self.freed_log.append(tuple(slots))
        pages = [s // self.page_size for s in list(slots)[::self.page_size]]
        if self._page_group is not None:
            self._page_group.extend(pages)
        else:
            self._release_pages(pages)

    def _release_pages(self, pages: list[int]) -> None:
        """0.5.23: staged when ``need_sort``, else put in front of the free list, in the given order."""
        if self.need_sort:
            self.release_pages.extend(pages)
        else:
            self.free_pages = pages + self.free_pages

    def free_group_begin(self) -> None:
        self._group = []
        self._page_group = []

    def free_group_end(self) -> None:
        """First the grouped ``free`` calls (sorted unique pages), then the grouped segments' pages."""
        group, self._group = self._group or [], None
        pages, self._page_group = self._page_group or [], None
        self.free(group)
        if pages:
            self._release_pages(pages)


class RecordingAllocator:
    """The notes' mock allocator "A": records every freed segment, in order, as a tuple."""

    page_size = 1

    def __init__(self) -> None:
        self.freed: list[tuple[int, ...]] = []

    def free(self, slots: Sequence[int]) -> None:
        self.freed.append(tuple(slots))

    def free_segment(self, slots: Sequence[int], start_pos: int = 0) -> None:
        self.free(slots)

    def available_size(self) -> int:
        return 0


class ReqToTokenPool:
    """``[rows+1, max_context_len]`` table of slot ids, one row per request; row 0 is padding."""

    def __init__(self, rows: int, max_context_len: int):
        self.rows = rows
        self.max_context_len = max_context_len
        self.req_to_token = [[0] * max_context_len for _ in range(rows + 1)]
        self.free_slots = list(range(1, rows + 1))

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, need_rows: int = 1) -> list[int] | None:
        if need_rows > len(self.free_slots):
            return None
        out, self.free_slots = self.free_slots[:need_rows], self.free_slots[need_rows:]
        return out

    def free(self, row: int) -> None:
        self.free_slots.append(row)

    def write(self, row: int, start_pos: int, slots: Sequence[int]) -> None:
        self.req_to_token[row][start_pos:start_pos + len(slots)] = list(slots)

    def read(self, row: int, start_pos: int, end_pos: int) -> list[int]:
        return self.req_to_token[row][start_pos:end_pos]
