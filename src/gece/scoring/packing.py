"""How a batch's token sequences are laid out for the model: one trie, cut into rows, fed in forward passes.

Every side's fed sequence (shared prefix + its own suffix, :mod:`gece.scoring.planning`) goes into a
trie (:class:`Forest`), so a beginning shared by both sides of a pair, or by several pairs, is one
path. The trie is cut into rows closed under ancestors, each token at position = its depth and
seeing only itself and its ancestors (a 4-D mask), so its hidden state is what the model computes
at the end of its own sequence:

- where gece's numerics make every layout give the same bits (the CPU), one forward pass per batch
  of rows of nearly equal length (:meth:`Forest.pack`);
- elsewhere (a GPU, whose kernels' bits depend on shapes), forward passes of fixed shapes:
  :data:`PASS_ROWS` rows of :data:`ROW_TOKENS` tokens, a token of depth d read from a pass of class
  ceil((d + 1) / ROW_TOKENS) (:meth:`Forest.pack_fixed`).

:func:`lay_out` does it for a batch and lists the trie nodes whose hidden state predicts a target token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gece.scoring.planning import PairPlan

ROW_TOKENS = 256  # packed row length (attention is quadratic in it, the matrix products are not)
PASS_ROWS = 8  # rows per forward pass on a GPU (8 x 256 = 2,048 tokens): fixed, so that bits do not move


@dataclass
class Packed:
    """One forward pass: token sequences of a forest packed into rows, ids, positions (depth) and the ancestor mask."""

    ids: list[list[int]]
    positions: list[list[int]]
    mask_rows: list[int]
    mask_q: list[int]
    mask_k: list[int]
    place: dict[int, tuple[int, int]]  # node -> (row, column) where it is read; a node may recur in other rows
    nodes: list[list[int]]  # row -> the node in each column (padding excluded)


class Forest:
    """A trie of token sequences: a sequence shared by several others (a prefix) is one path."""

    def __init__(self) -> None:
        self.token: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.children: list[dict[int, int]] = []
        self.roots: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.token)

    def add(self, seq: Sequence[int]) -> list[int]:
        """Insert a sequence; returns the node of each of its tokens."""
        nodes: list[int] = []
        level = self.roots
        for tok in seq:
            node = level.get(tok)
            if node is None:
                node = len(self.token)
                self.token.append(tok)
                self.parent.append(nodes[-1] if nodes else -1)
                self.depth.append(len(nodes))
                self.children.append({})
                level[tok] = node
            nodes.append(node)
            level = self.children[node]
        return nodes

    def ancestors(self, node: int, stop: Callable[[int], bool] = lambda a: False) -> list[int]:
        """The node and its ancestors, nearest first, up to the root or the first for which ``stop`` is true."""
        path = []
        while node >= 0 and not stop(node):
            path.append(node)
            node = self.parent[node]
        return path

    def _order(self) -> list[int]:
        """Every node, trees in insertion order, each in depth-first order (ancestors first)."""
        order: list[int] = []
        for root in self.roots.values():
            stack = [root]
            while stack:
                n = stack.pop()
                order.append(n)
                stack.extend(reversed(list(self.children[n].values())))
        return order

    def _rows(self, row_tokens: int) -> list[list[int]]:
        """Cut the forest, in depth-first order, into ceil(nodes / ``row_tokens``) rows of nearly equal
        length. Each row is closed under ancestors: one that starts inside a tree repeats the path
        above its first node, so every token sees its ancestors in its own row. (Whole trees per row
        would let one tree of a thousand nodes, every pair of a batch starting with "The", make a row
        of a thousand, and attention is quadratic in a row's length.) A repeated node computes the
        same bits again; it is read from its first row."""
        order = self._order()
        share = -(-len(order) // max(1, -(-len(order) // row_tokens)))  # own nodes per row
        rows: list[list[int]] = []
        row: list[int] = []
        inside: set[int] = set()
        own = 0  # nodes placed in this row for the first time
        for n in order:
            if own == share:
                rows.append(row)
                row, inside, own = [], set(), 0
            path = self.ancestors(n, stop=inside.__contains__)
            row.extend(reversed(path))
            inside.update(path)
            own += 1
        rows.append(row)
        return rows

    def pack(self, row_tokens: int, pad_id: int) -> Packed:
        """Place the forest into rows (:meth:`_rows`), each in depth-first order so ancestors come
        first, padded to one length; a node placed in several rows is read from the first (``place``)."""
        rows = self._rows(row_tokens)
        place: dict[int, tuple[int, int]] = {}
        for r, row in enumerate(rows):
            for c, n in enumerate(row):
                place.setdefault(n, (r, c))
        return self._packed(rows, max(len(r) for r in rows), len(rows), pad_id, place)

    def pack_fixed(self, rows_per_pass: int, width: int, pad_id: int) -> list[Packed]:
        """Place the forest into forward passes whose shapes depend on the code alone, for devices whose
        kernels (and so bits) change with the shape: a node of depth d is read from a row of class
        m = ceil((d + 1) / ``width``), and the rows of class m go into passes of exactly
        max(1, ``rows_per_pass`` // m) rows of m ``width`` tokens (padding rows and columns added). A row
        holds its nodes' ancestors first (repeated from other rows where needed), filled in depth-first
        order while it fits. So a node is computed in a pass of the same shape, whatever else the batch holds."""
        rows: dict[int, list[list[int]]] = {}
        owns: dict[int, list[dict[int, int]]] = {}  # class -> row -> node read there -> its column
        inside: dict[int, set[int]] = {}
        for n in self._order():
            m = -(-(self.depth[n] + 1) // width)
            cls, seen = rows.setdefault(m, [[]]), inside.setdefault(m, set())
            own = owns.setdefault(m, [{}])
            path = self.ancestors(n, stop=seen.__contains__)
            if cls[-1] and len(cls[-1]) + len(path) > m * width:
                cls.append([])
                own.append({})
                seen.clear()
                path = self.ancestors(n)
            own[-1][n] = len(cls[-1]) + len(path) - 1
            cls[-1].extend(reversed(path))
            seen.update(path)
        passes = []
        for m in sorted(rows):
            per = max(1, rows_per_pass // m)
            for start in range(0, len(rows[m]), per):
                place = {n: (r, c) for r, own in enumerate(owns[m][start : start + per]) for n, c in own.items()}
                passes.append(self._packed(rows[m][start : start + per], m * width, per, pad_id, place))
        return passes

    def _packed(
        self, rows: list[list[int]], width: int, n_rows: int, pad_id: int, place: dict[int, tuple[int, int]]
    ) -> Packed:
        """Rows of nodes as a forward pass of ``n_rows`` rows of ``width`` tokens: each token sees itself and its
        ancestors; padding (to the width, and whole rows of it) sees itself only (no empty softmax rows)."""
        ids, positions, mr, mq, mk = [], [], [], [], []
        for r in range(n_rows):
            row = rows[r] if r < len(rows) else []
            col: dict[int, int] = {}  # node -> its column in this row (a row holds its nodes' ancestors)
            for c, n in enumerate(row):
                col[n] = c
                seen = [col[a] for a in self.ancestors(n)]  # the node and its ancestors
                mr += [r] * len(seen)
                mq += [c] * len(seen)
                mk += seen
            for c in range(len(row), width):
                mr.append(r)
                mq.append(c)
                mk.append(c)
            ids.append([self.token[n] for n in row] + [pad_id] * (width - len(row)))
            positions.append([self.depth[n] for n in row] + [0] * (width - len(row)))
        return Packed(ids, positions, mr, mq, mk, place, [list(r) for r in rows])


@dataclass
class BatchStats:
    tokens_fed: int = 0  # real tokens through the decoder
    tokens_padded: int = 0  # including padding
    head_positions: int = 0  # hidden states sent through the LM head
    forward_calls: int = 0

    def add(self, other: BatchStats) -> None:
        self.tokens_fed += other.tokens_fed
        self.tokens_padded += other.tokens_padded
        self.head_positions += other.head_positions
        self.forward_calls += other.forward_calls


@dataclass
class BatchLayout:
    """A batch's token forest packed into forward passes, each pair side's nodes, and the LM-head inputs."""

    forest: Forest
    reads: list[tuple[list[int], list[int]]]  # per pair: the nodes of its more and less sequences
    passes: list[Packed]
    where: dict[int, int]  # node -> row of the LM-head input
    heads: list[list[tuple[int, int, int]]]  # per pass: (LM-head input row, row, column) of the nodes read there

    @property
    def packed(self) -> Packed:
        """The only forward pass (variable shapes: one per batch)."""
        (only,) = self.passes
        return only

    @property
    def stats(self) -> BatchStats:
        return BatchStats(
            tokens_fed=sum(len(r) for p in self.passes for r in p.nodes),
            tokens_padded=sum(len(p.ids) * len(p.ids[0]) for p in self.passes),
            head_positions=len(self.where),
            forward_calls=len(self.passes),
        )


def lay_out(plans: Sequence[PairPlan], pad_id: int, pass_rows: int | None = None) -> BatchLayout:
    """Every side's fed sequence (shared prefix + its own suffix) in one trie, packed into rows (one forward
    pass; with ``pass_rows``, passes of fixed shapes: :meth:`Forest.pack_fixed`), the trie nodes whose
    hidden state predicts a target token (each once), and where each pass holds them."""
    forest = Forest()
    reads: list[tuple[list[int], list[int]]] = []
    for pl in plans:
        reads.append((forest.add(pl.prefix + pl.more.suffix), forest.add(pl.prefix + pl.less.suffix)))
    passes = (
        [forest.pack(ROW_TOKENS, pad_id)] if pass_rows is None else forest.pack_fixed(pass_rows, ROW_TOKENS, pad_id)
    )
    where: dict[int, int] = {}
    for pl, (nm, nl) in zip(plans, reads, strict=True):
        for sp, nodes in ((pl.more, nm), (pl.less, nl)):
            for w in sp.targets:
                for pos, _tok in w:
                    where.setdefault(nodes[pos], len(where))
    heads: list[list[tuple[int, int, int]]] = [[] for _ in passes]
    read_in = {n: i for i, p in enumerate(passes) for n in p.place}  # every node is read in one pass
    for n, k in where.items():
        heads[read_in[n]].append((k, *passes[read_in[n]].place[n]))
    return BatchLayout(forest, reads, passes, where, heads)
