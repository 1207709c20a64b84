"""A run's rankings of its test split, and the compact arrays a run archive carries for the views that read them.

Three views read a run's test embeddings rather than its metrics (:data:`reproduce.spec.views.VIEWS`): the
qualitative figures and explorer, SAM Table 1's model-based variant and listwise Fig. 7 (b). On the machine that
trained a run they are computed from its embeddings. A run imported without them (``--export-embeddings views``)
carries instead what those views read, computed on the exporting machine by the same functions, a few hundred kB
instead of a few MB:

* :class:`Ranking` — each query's top candidates in descending similarity (ties: the lower candidate index, a stable
  sort) with their similarities, image queries (image→text) and caption queries (text→image);
* named arrays of an analysis (:func:`stored` / :func:`read_stored`: listwise Fig. 7 (b) errors).

Every stored set names the code that computed it (:func:`frozen_code`); a set computed by other code, or asked of a
run that does not carry it, raises :class:`coherent_itr.runs.ImportedRunMissing` naming the run and what is missing.

The code a set names is locked as the library's run keys are, in the same lock (:mod:`coherent_itr.code_identity`,
its ``views``): per stored set, the code label its archives name and the source hashes accepted for it — the one
frozen and those of edits accepted as keeping every stored array (``python -m reproduce.driver.code_identity
--accept-view NAME WHY``, which checks the pinned arrays of :mod:`reproduce.driver.pins` first). An edit not
accepted names its live source hash, so its sets and the archives' are never read as each other's;
``tests/reproduce/driver/test_view_code_cli.py`` fails until the edit is accepted or bumped.
"""

from __future__ import annotations

import hashlib
import inspect

import numpy as np

from coherent_itr import code_identity
from coherent_itr.runs import ImportedRunMissing

QUERIES = ("image", "caption")  # image: image→text (rank captions); caption: text→image (rank images)
PREFIX = "view_"  # every stored array's name starts with it: view_<set>_<field>
AGAIN = "export the run again (python -m reproduce --export-runs FILE, or --export-embeddings all) or train it here"


def code_hash(*objs) -> str:
    """SHA-256 (first 16 hex digits) of the source of ``objs`` (functions, classes, modules; a string as it is, e.g.
    another code hash): names the code that computed a stored set, so that a set computed by other code is never
    read as this code's."""
    h = hashlib.sha256()
    for o in objs:
        h.update((o if isinstance(o, str) else inspect.getsource(o)).encode())
    return h.hexdigest()[:16]


def declared_codes() -> dict:
    """The lock's ``views``: ``{set name: {"code": the code its stored sets name, "sources": [accepted source
    hashes]}}`` (``{}``: every code live)."""
    return code_identity.load().get("views", {})


def code_state(name: str, *objs) -> tuple[str, str]:
    """``(state, code)`` of the stored set ``name`` computed by ``objs``. The state: ``frozen`` (the source of
    ``objs`` hashes, :func:`code_hash`, to the frozen one in the lock), ``declared`` (to the source of an edit
    accepted as keeping every stored array), ``undeclared`` (to neither) or ``not frozen`` (no entry). The code its
    sets name: the frozen code in the first two states, else that live hash."""
    live = code_hash(*objs)
    entry = declared_codes().get(name)
    if entry is None:
        return "not frozen", live
    if live not in entry["sources"]:
        return "undeclared", live
    return ("frozen" if live == entry["code"] else "declared"), entry["code"]


def frozen_code(name: str, *objs) -> str:
    """The code the stored set ``name``, computed by ``objs``, names (:func:`code_state`)."""
    return code_state(name, *objs)[1]


def has_embeddings(arrays) -> bool:
    """Whether a run's arrays hold its test embeddings (an imported slim run's do not)."""
    return "test_img" in arrays and "test_cap" in arrays


def stored(name: str, arrays: dict, code: str) -> dict:
    """``arrays`` as the stored set ``name`` computed by ``code`` (:func:`code_hash`): the entries of a run's
    ``arrays.npz`` an archive carries."""
    out = {f"{PREFIX}{name}_{k}": np.asarray(v) for k, v in arrays.items()}
    out[f"{PREFIX}{name}_code"] = np.asarray(code)
    return out


def read_stored(arrays, name: str, code: str, run: str = "") -> dict:
    """The stored set ``name`` of a run's ``arrays`` (without its prefix), checked to be computed by ``code``.
    :class:`ImportedRunMissing` when the run does not carry it or carries another code's."""
    head = f"{PREFIX}{name}_"
    got = {k[len(head) :]: arrays[k] for k in list(arrays) if k.startswith(head)}
    what = f"run {run or getattr(arrays, 'key', '?')}"
    if "code" not in got:
        raise ImportedRunMissing(
            f"{what} was imported without its test embeddings and without the {name!r} arrays this view reads; {AGAIN}"
        )
    theirs = str(got.pop("code"))
    if theirs != code:
        raise ImportedRunMissing(
            f"{what}: its {name!r} arrays were computed by other code (code {theirs}) than this checkout's "
            f"({code}); {AGAIN}"
        )
    return got


# ----------------------------------------------------------------------------------------------------------------
# Similarities and rankings
# ----------------------------------------------------------------------------------------------------------------
def _as_float32(a, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows × embedding dim), got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{name} must hold floats (float16 or float32 embeddings), got dtype {a.dtype}")
    a = a.astype(np.float32)
    if not np.isfinite(a).all():
        r = int(np.argwhere(~np.isfinite(a))[0, 0])
        raise ValueError(f"{name} has a non-finite value in row {r}")
    return a


def similarity(img, cap) -> np.ndarray:
    """Images × captions similarity (dot product of the run's L2-normalised embeddings = cosine), float32."""
    img, cap = _as_float32(img, "image embeddings"), _as_float32(cap, "caption embeddings")
    if img.shape[1] != cap.shape[1]:
        raise ValueError(f"image embeddings have dimension {img.shape[1]}, caption embeddings {cap.shape[1]}")
    return img @ cap.T


def _check_query(query: str) -> None:
    if query not in QUERIES:
        raise ValueError(f"query={query!r} must be one of {QUERIES}")


def _oriented(sim: np.ndarray, query: str) -> np.ndarray:
    _check_query(query)
    return sim if query == "image" else sim.T


def top_k_indices(sim: np.ndarray, k: int = 5, query: str = "image") -> np.ndarray:
    """(n_queries, k) candidate indices in rank order; ties by lower candidate index."""
    s = _oriented(np.asarray(sim), query)
    if not 1 <= k <= s.shape[1]:
        raise ValueError(f"k={k} must be between 1 and the number of candidates ({s.shape[1]})")
    return np.argsort(-s, axis=1, kind="stable")[:, :k]


class Ranking:
    """The rankings of one run on its test split: per query direction (:data:`QUERIES`), each query's top
    candidates and their similarities. Either over a whole similarity matrix (:meth:`of_similarity`: any ``k``)
    or as stored by an archive (:meth:`from_arrays`: the top ``kept(query)`` only, asking for more raises
    :class:`ImportedRunMissing`)."""

    NAME = "ranking"  # the stored set's name

    def __init__(self, shape, *, sim=None, top=None, values=None, run: str = ""):
        self.shape = tuple(int(n) for n in shape)
        self._sim = sim
        self._top = top or {}
        self._values = values or {}
        self.run = run

    @classmethod
    def of_similarity(cls, sim, run: str = "") -> Ranking:
        """The ranking of an (n_images, n_captions) similarity matrix."""
        sim = np.asarray(sim)
        if sim.ndim != 2:
            raise ValueError(f"a similarity matrix is (n_images, n_captions), got shape {sim.shape}")
        return cls(sim.shape, sim=sim, run=run)

    @classmethod
    def of_embeddings(cls, img, cap, run: str = "") -> Ranking:
        """The ranking of a run's test embeddings (:func:`similarity`)."""
        return cls.of_similarity(similarity(img, cap), run)

    @classmethod
    def of_run(cls, res, run: str = "") -> Ranking:
        """The ranking of a cached run (a :class:`coherent_itr.runs.RunResult`): from its test embeddings when it
        has them, else from the ranking its archive carried."""
        run = run or getattr(res.arrays, "key", "")
        if has_embeddings(res.arrays):
            return cls.of_embeddings(res.arrays["test_img"], res.arrays["test_cap"], run)
        return cls.from_arrays(res.arrays, run)

    def kept(self, query: str) -> int:
        """How many candidates per query of direction ``query`` this ranking can give."""
        _check_query(query)
        if self._sim is not None:
            return self.shape[1] if query == "image" else self.shape[0]
        return int(self._top[query].shape[1]) if query in self._top else 0

    def _check(self, query: str, k: int) -> None:
        _check_query(query)
        n = self.shape[1] if query == "image" else self.shape[0]
        if not 1 <= k <= n:
            raise ValueError(f"k={k} must be between 1 and the number of candidates ({n})")
        if k > self.kept(query):
            raise ImportedRunMissing(
                f"run {self.run or '?'} was imported without its test embeddings with the top {self.kept(query)} "
                f"of each {query} query; the view asks for the top {k}: {AGAIN}"
            )

    def _rows(self, query: str, rows):
        n_q = self.shape[0] if query == "image" else self.shape[1]
        rows = np.arange(n_q) if rows is None else np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if rows.size and (rows.min() < 0 or rows.max() >= n_q):
            raise ValueError(f"{query} query index out of range: the split has {n_q} {query}s")
        return rows

    def _ranked(self, query: str, k: int, rows=None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`top` and :meth:`values` from one sort."""
        self._check(query, k)
        rows = self._rows(query, rows)
        if self._sim is None:
            return self._top[query][rows, :k].astype(np.int64), self._values[query][rows, :k]
        s = _oriented(self._sim, query)[rows]
        top = top_k_indices(s, k, "image")
        return top, np.take_along_axis(s, top, axis=1)

    def top(self, query: str, k: int, rows=None) -> np.ndarray:
        """(len(rows), k) candidate indices in rank order of the queries ``rows`` (default: every query)."""
        return self._ranked(query, k, rows)[0]

    def values(self, query: str, k: int, rows=None) -> np.ndarray:
        """(len(rows), k) similarities of :meth:`top`'s candidates."""
        return self._ranked(query, k, rows)[1]

    def scores(self, k: int) -> np.ndarray:
        """An (n_images, n_captions) matrix on which every image query has the top ``k`` candidates it has on the
        similarities under any tie rule, so that a per-query metric of image queries at a cut-off ≤ ``k`` (NCS@5,
        R@5 under the library's tie rule) gives what it gives on the similarities. The similarities themselves;
        from a stored ranking, the kept candidates' similarities and a constant below them elsewhere. That holds
        only where every candidate tied with a query's ``k``-th is kept: a query whose tie run at place ``k``
        reaches the last kept candidate (a candidate not kept may tie with it) raises
        :class:`ImportedRunMissing`."""
        self._check("image", k)
        if self._sim is not None:
            return np.asarray(self._sim)
        kept = self.kept("image")
        top, value = self._top["image"], self._values["image"]
        open_run = value[:, kept - 1] == value[:, k - 1]
        if open_run.any():
            q = int(np.flatnonzero(open_run)[0])
            raise ImportedRunMissing(
                f"run {self.run or '?'}: image query {q} ties its candidate at place {k} with every kept one up to "
                f"place {kept}: a candidate not kept may tie too, so its top {k} is not known; {AGAIN}"
            )
        out = np.full(self.shape, float(value.min()) - 1.0, dtype=np.float64)
        np.put_along_axis(out, top.astype(np.int64), value.astype(np.float64), axis=1)
        return out

    def to_arrays(self, ks: dict[str, int]) -> dict:
        """The stored set of this ranking: for every ``query: k`` of ``ks``, each query's top ``k`` candidates
        (``<query>_top``, int32) and their similarities (``<query>_sim``, float32), with the shape."""
        out = {"shape": np.asarray(self.shape, dtype=np.int64)}
        for query, k in ks.items():
            top, values = self._ranked(query, k)
            out[f"{query}_top"], out[f"{query}_sim"] = top.astype(np.int32), values.astype(np.float32)
        return stored(self.NAME, out, RANKING_CODE)

    @classmethod
    def from_arrays(cls, arrays, run: str = "") -> Ranking:
        """The ranking a run's archive carried (:meth:`to_arrays`)."""
        got = read_stored(arrays, cls.NAME, RANKING_CODE, run)
        queries = [q for q in QUERIES if f"{q}_top" in got]
        return cls(
            got["shape"],
            top={q: np.asarray(got[f"{q}_top"]) for q in queries},
            values={q: np.asarray(got[f"{q}_sim"]) for q in queries},
            run=run or getattr(arrays, "key", ""),
        )


def as_ranking(x) -> Ranking:
    """A :class:`Ranking` as is, or the ranking of a similarity matrix."""
    return x if isinstance(x, Ranking) else Ranking.of_similarity(x)


RANKING_SOURCES = (_as_float32, similarity, _oriented, top_k_indices, Ranking._ranked, Ranking.to_arrays)  # stores
RANKING_CODE = frozen_code(Ranking.NAME, *RANKING_SOURCES)
