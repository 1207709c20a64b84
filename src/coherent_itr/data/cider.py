"""CIDEr-D relevance (Vedantam et al. 2015), vectorised with sparse tf-idf matrices.

SAM (Eq. 7) uses φ(c | refs) = CIDEr-D of a caption against the 5 reference captions of an
image as its semantic margin; NCS (SAM Eqs. 3–5) ranks retrieved captions by the same score.
This module computes exactly what ``pycocoevalcap``'s ``Cider`` scorer (the CIDEr-D of the COCO
caption toolkit) computes, for every (image, caption) pair at once:

* tokens: the scorer splits on white space; the toolkit first runs the Stanford PTB tokenizer
  (lower-cased) and drops punctuation tokens. ``tokenizer="simple"`` (default) is a pure-python
  re-implementation of that step; ``"ptb"`` runs the toolkit's own Java tokenizer.
* g_n(s): tf-idf vector of the n-grams (n = 1..4) of s, tf = raw count,
  idf(g) = log(N) − log(max(1, df(g))) with N the number of reference *sets* (images) in the
  corpus and df(g) the number of images whose reference captions contain g ("corpus" mode);
  n-grams never seen in a reference have idf = log N (they only enlarge the candidate's norm);
* CIDEr-D_n(c, S) = (1/|S|) Σ_{s∈S} e^{−(ℓ_c−ℓ_s)²/(2σ²)} · Σ_g min(g_n(c), g_n(s))·g_n(s) / (‖g_n(c)‖‖g_n(s)‖)
  — clipping of the candidate's counts and the Gaussian length penalty (σ = 6), with ℓ the
  number of bigrams of a sentence, as in the toolkit;
* CIDEr-D(c, S) = 10 · mean_n CIDEr-D_n(c, S).

Vectorisation: because g = count·idf with idf ≥ 0, min(g_c, g_s)·g_s = idf²·min(n_c, n_s)·n_s and
min(n_c, n_s) = Σ_{t≥1} [n_c ≥ t][n_s ≥ t], so the whole clipped, normalised sum is one sparse
product A·Bᵀ with A = ⊕_t [n_c ≥ t]/‖g_n(c)‖ and B = ⊕_t idf²·n_s·[n_s ≥ t]/‖g_n(s)‖.

``include_candidate`` (provider parameter): with ``True`` (default) image i's references are all
of its 5 captions even when the candidate is one of them — what SAM's code does (its margin φ(c⁺|refs)
scores the positive against references that contain it) and what NCS needs for the ideal
list; with ``False`` a caption of image i is scored against the other 4 (leave-one-out), so a
ground-truth caption is not rewarded for matching itself. Document frequencies always come from
the full reference corpus (all images of the split with all their captions).
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from .base import CaptionedImages
from .relevance import cached_matrix, check_params

PUNCTUATIONS = {
    "''",
    "'",
    "``",
    "`",
    "-LRB-",
    "-RRB-",
    "-LCB-",
    "-RCB-",
    ".",
    "?",
    "!",
    ",",
    ":",
    "-",
    "--",
    "...",
    ";",
}  # pycocoevalcap's filter; note PTB's -lowerCase output "-lrb-" is NOT in it
_BRACKETS = {"(": "-lrb-", ")": "-rrb-", "{": "-lcb-", "}": "-rcb-", "[": "-lsb-", "]": "-rsb-"}
_CLITIC = re.compile(r"(n't|'s|'re|'ve|'ll|'m|'d)$")
_ABBREV = re.compile(r"^[a-z]$|^(?:[a-z]\.)+[a-z]?$|^(?:mr|mrs|ms|dr|jr|sr|st|vs|etc|mt|co|inc|ltd|no)$")
_EDGE_PUNCT = ".,!?;:\"'`()[]{}"
_SPLIT_INNER = re.compile(r"(=|(?<![A-Z])&|&(?![A-Z]))")  # PTB keeps AT&T, splits at&t


def tokenize_simple(caption: str) -> str:
    """PTB-style tokens (lower-cased, punctuation tokens removed) joined by single spaces.

    A pure-python stand-in for ``PTBTokenizer -preserveLines -lowerCase`` followed by the
    toolkit's punctuation filter, written from their observed behaviour on captions: punctuation
    is split from word edges (a final period stays on abbreviations such as "mr." or "d.c."),
    clitics (n't, 's, 're, …) and "cannot" → "can not" are split, "=" and "&" become tokens
    (except between capitals: AT&T),
    brackets become "-lrb-"/"-rrb-" (which the toolkit's filter, written for upper case, keeps),
    quotes are dropped, inner hyphens and periods (t-shirt, a.m.) stay inside the word.
    It agrees with the Java tokenizer on all but a handful of the 40,460 Flickr8k captions."""
    out: list[str] = []
    for raw in _SPLIT_INNER.sub(r" \1 ", caption.replace("\n", " ")).lower().split():
        if raw == "'n'":
            out.append(raw)
            continue
        lead: list[str] = []
        trail: list[str] = []
        w = raw
        while w and (w[0] in _EDGE_PUNCT or w[0] == "-" and len(w) > 1 and w[1] != "-") and not _CLITIC.fullmatch(w):
            lead.append(w[0])
            w = w[1:]
        while w and w[-1] in _EDGE_PUNCT:
            if w.endswith("...") and len(w) > 3:
                trail.insert(0, "...")
                w = w[:-3]
                continue
            if w[-1] == "." and _ABBREV.match(w[:-1]):
                break  # abbreviation: PTB keeps its period
            trail.insert(0, w[-1])
            w = w[:-1]
        toks = []
        if w == "cannot":
            toks = ["can", "not"]
        elif w:
            m = _CLITIC.search(w)
            toks = [w[: m.start()], w[m.start() :]] if m and m.start() > 0 else [w]
        for t in lead + toks + trail:
            t = _BRACKETS.get(t, t)
            if t != '"' and t not in PUNCTUATIONS:  # PTB turns '"' into `` or '' — both dropped
                out.append(t)
    return " ".join(out)


def tokenize_ptb(captions: Sequence[str]) -> list[str]:
    """The toolkit's own tokenizer (Stanford PTBTokenizer via Java) + punctuation filter."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    try:
        res = PTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(
            "tokenizer='ptb' needs Java (the Stanford tokenizer jar of pycocoevalcap); use tokenizer='simple'"
        ) from exc
    return [res[i][0] for i in range(len(captions))]


def tokenize(captions: Sequence[str], tokenizer: str = "simple") -> list[str]:
    if tokenizer == "simple":
        return [tokenize_simple(c) for c in captions]
    if tokenizer == "ptb":
        return tokenize_ptb(captions)
    if tokenizer == "none":
        return list(captions)
    raise ValueError(f"CIDEr tokenizer={tokenizer!r} is invalid; expected 'simple', 'ptb' or 'none'")


class CiderD:
    """CIDEr-D over a reference corpus: ``ref_sets[i]`` are the (tokenised) references of item i.

    Document frequencies and N come from ``ref_sets``. Sentences are given as white-space
    tokenised strings (see :func:`tokenize`)."""

    def __init__(self, ref_sets: Sequence[Sequence[str]], n: int = 4, sigma: float = 6.0) -> None:
        if not ref_sets:
            raise ValueError("CiderD: the reference corpus is empty")
        self.n, self.sigma = int(n), float(sigma)
        self._memo: dict[str, Counter] = {}
        self.vocab: dict[tuple, int] = {}
        sets_counts = []
        for refs in ref_sets:
            seen = set()
            for s in refs:
                for g in self._ngrams(s):
                    seen.add(g)
            sets_counts.append(seen)
            for g in seen:
                if g not in self.vocab:
                    self.vocab[g] = len(self.vocab)
        df = np.zeros(len(self.vocab))
        for seen in sets_counts:
            df[[self.vocab[g] for g in seen]] += 1
        self.n_sets = len(ref_sets)
        self.log_n = np.log(float(self.n_sets))
        self.idf = self.log_n - np.log(np.maximum(1.0, df))
        self.order = np.zeros(len(self.vocab), dtype=np.int64)
        for g, j in self.vocab.items():
            self.order[j] = len(g) - 1

    def _ngrams(self, sentence: str) -> Counter:
        c = self._memo.get(sentence)
        if c is None:
            words = sentence.split()
            c = Counter(tuple(words[i : i + k]) for k in range(1, self.n + 1) for i in range(len(words) - k + 1))
            self._memo[sentence] = c
        return c

    def encode(self, sentences: Sequence[str]):
        """Sparse pieces of a list of sentences: (A, B, length) with A, B as in the module doc."""
        rows, cols, vals = [], [], []
        oov_sq = np.zeros((len(sentences), self.n))
        length = np.zeros(len(sentences))
        for r, s in enumerate(sentences):
            cnt = self._ngrams(s)
            length[r] = sum(v for g, v in cnt.items() if len(g) == 2)
            for g, v in cnt.items():
                j = self.vocab.get(g)
                if j is None:
                    oov_sq[r, len(g) - 1] += (v * self.log_n) ** 2
                else:
                    rows.append(r)
                    cols.append(j)
                    vals.append(v)
        m, G = len(sentences), len(self.vocab)
        C = sp.csr_matrix((np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(m, G))
        C.sum_duplicates()
        # norms per order: ||g_n(s)||² = Σ (count·idf)² over in-vocabulary n-grams + OOV part
        sq = C.multiply(C).multiply(self.idf[None, :] ** 2).tocsr()
        norm_sq = oov_sq.copy()
        onehot = sp.csr_matrix((np.ones(G), (np.arange(G), self.order)), shape=(G, self.n))
        norm_sq += np.asarray((sq @ onehot).todense())
        norm = np.sqrt(norm_sq)
        inv = np.where(norm > 0, 1.0 / np.where(norm > 0, norm, 1.0), 0.0)  # (m, n)
        t_max = int(C.max()) if C.nnz else 1
        Cc = C.tocoo()
        inv_e = inv[Cc.row, self.order[Cc.col]]
        a_parts, b_parts = [], []
        for t in range(1, t_max + 1):
            keep = Cc.data >= t
            a_parts.append(sp.csr_matrix((inv_e[keep], (Cc.row[keep], Cc.col[keep])), shape=(m, G)))
            bv = self.idf[Cc.col[keep]] ** 2 * Cc.data[keep] * inv_e[keep]
            b_parts.append(sp.csr_matrix((bv, (Cc.row[keep], Cc.col[keep])), shape=(m, G)))
        return _Encoded(sp.hstack(a_parts, format="csr"), sp.hstack(b_parts, format="csr"), length, t_max, G)

    def pair_terms(self, cand: "_Encoded", cand_rows, ref: "_Encoded", ref_rows) -> np.ndarray:
        """(len(cand_rows), len(ref_rows)) float64: Σ_n penalty·clipped cosine_n (before /n/|S|·10)."""
        A = _pad_levels(cand.A, cand.t_max, max(cand.t_max, ref.t_max), cand.G)[np.asarray(cand_rows)]
        B = _pad_levels(ref.B, ref.t_max, max(cand.t_max, ref.t_max), ref.G)[np.asarray(ref_rows)]
        val = (A @ B.T).toarray()
        delta = cand.length[np.asarray(cand_rows)][:, None] - ref.length[np.asarray(ref_rows)][None, :]
        return val * np.exp(-(delta**2) / (2 * self.sigma**2))

    def score(self, candidates: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
        """CIDEr-D of ``candidates[k]`` against ``refs[k]`` (pairwise lists), float64."""
        cand = self.encode(candidates)
        flat = [s for r in refs for s in r]
        owner = np.repeat(np.arange(len(refs)), [len(r) for r in refs])
        ref = self.encode(flat)
        out = np.zeros(len(candidates))
        for k in range(len(candidates)):
            idx = np.flatnonzero(owner == k)
            out[k] = 10.0 / self.n * self.pair_terms(cand, [k], ref, idx).sum() / max(len(idx), 1)
        return out


class _Encoded:
    def __init__(self, A, B, length, t_max, G):
        self.A, self.B, self.length, self.t_max, self.G = A, B, length, t_max, G


def _pad_levels(M: sp.csr_matrix, t_have: int, t_want: int, G: int) -> sp.csr_matrix:
    if t_have == t_want:
        return M
    return sp.hstack([M, sp.csr_matrix((M.shape[0], G * (t_want - t_have)))], format="csr")


#: per-process memo of the tokenised, encoded corpus of a split: every SAM run of a worker builds the same
#: one (≈ 7 s for the Flickr8k training split); read-only once built. Keyed by the captions themselves.
_CORPUS: dict[tuple, tuple] = {}
_CORPUS_MAX = 4


def _corpus(captions: tuple[str, ...], cpi: int, tokenizer: str) -> tuple[list[str], CiderD, _Encoded]:
    """Tokens, :class:`CiderD` (document frequencies over the images' reference sets) and the encoded
    captions of one split — built once per process per (captions, captions per image, tokenizer)."""
    key = (captions, cpi, tokenizer)
    hit = _CORPUS.get(key)
    if hit is None:
        tokens = tokenize(captions, tokenizer)
        cider = CiderD([tokens[i * cpi : (i + 1) * cpi] for i in range(len(tokens) // cpi)])
        hit = (tokens, cider, cider.encode(tokens))
        if len(_CORPUS) >= _CORPUS_MAX:
            _CORPUS.pop(next(iter(_CORPUS)))
        _CORPUS[key] = hit
    return hit


class CiderRelevance:
    """CIDEr-D of caption j against image i's reference captions (see the module docstring).

    Parameters: ``include_candidate`` (True: SAM code / NCS; False: leave-one-out),
    ``tokenizer`` ("simple" | "ptb"); n = 4, σ = 6 as in the toolkit. The corpus (document frequencies) is the
    split itself."""

    PARAMS = {
        "include_candidate": (True, bool),
        "tokenizer": ("simple", ("simple", "ptb")),
    }

    def __init__(self, split: CaptionedImages, *, cache_dir=None, **params) -> None:
        p = check_params("cider", params, self.PARAMS)
        self.params = p
        self.include_candidate = p["include_candidate"]
        self.name = f"cider[{'with' if self.include_candidate else 'without'} candidate]"
        self.split, self.cache_dir, self.cpi = split, cache_dir, split.captions_per_image
        self.tokens, self.cider, self.enc = _corpus(tuple(split.captions), self.cpi, p["tokenizer"])
        self._scale = 10.0 / self.cider.n

    def _block(self, image_idx: np.ndarray, caption_idx: np.ndarray) -> np.ndarray:
        cpi = self.cpi
        ref_rows = (image_idx[:, None] * cpi + np.arange(cpi)).reshape(-1)
        t = self.cider.pair_terms(self.enc, caption_idx, self.enc, ref_rows)  # (m, n*cpi)
        t = t.reshape(len(caption_idx), len(image_idx), cpi)
        n_refs = np.full((len(caption_idx), len(image_idx)), float(cpi))
        if not self.include_candidate:
            own = ref_rows.reshape(len(image_idx), cpi)[None, :, :] == caption_idx[:, None, None]
            t = np.where(own, 0.0, t)
            n_refs -= own.sum(axis=2)
        return (self._scale * t.sum(axis=2) / np.maximum(n_refs, 1)).T  # (images, captions)

    def batch(self, image_idx, caption_idx) -> np.ndarray:
        image_idx, caption_idx = np.asarray(image_idx), np.asarray(caption_idx)
        return self._block(image_idx, caption_idx).astype(np.float32)

    def caption_matrix(self, rows=None, cols=None) -> np.ndarray:
        """CIDEr-D of caption ``cols[j]`` against the single reference caption ``rows[i]``."""
        rows = np.arange(self.split.n_captions) if rows is None else np.asarray(rows)
        cols = np.arange(self.split.n_captions) if cols is None else np.asarray(cols)
        return (self._scale * self.cider.pair_terms(self.enc, cols, self.enc, rows).T).astype(np.float32)

    def _compute_matrix(self, chunk: int = 500) -> np.ndarray:
        n_img, n_cap = self.split.n_images, self.split.n_captions
        out = np.empty((n_img, n_cap), dtype=np.float32)
        all_img = np.arange(n_img)
        for s in range(0, n_cap, chunk):
            cols = np.arange(s, min(s + chunk, n_cap))
            out[:, cols] = self._block(all_img, cols)
        return out

    def matrix(self) -> np.ndarray:
        return cached_matrix(
            "cider",
            {**self.params, "n": self.cider.n},
            self.split.captions,
            self.cpi,
            self._compute_matrix,
            self.cache_dir,
        )
