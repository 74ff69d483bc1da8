"""The n-gram language models (ARPA) for shallow fusion in the CTC prefix
beam search: a unit model, whose words are the model's units (units.txt
strings such as "▁the", "s"), and a word model, whose words are the training
text's words and which the decoder also uses as its lexicon
(decoder/word_lm.h); both with <s>, </s> and <unk>.

    /usr/bin/python3 -m tools.train.lm --corpus tools/train/corpus \\
        --model models/en-conformer-ctc --out DIR [--order 5] [--prune 0,0,0,2,4] \\
        [--word-order 2] [--word-prune 0,2] [--no-words]

writes the bundled model's lm.arpa.gz, words.arpa.gz and lm.json (weights
and bonuses: --weight, --token-bonus, --word-weight, --word-bonus,
--unknown-word-penalty) into DIR; the C++ server and oasr-transcribe use
them whenever the model directory holds an lm.json.

1. Tokenizer: reproduces tools/train/tokenizer.py's BPE model (seeded, so
   deterministic) in a temporary folder, or takes --tokenizer DIR (bpe.model
   and units.txt), and refuses unless its units.txt is byte-identical to the
   model's.
2. Text: only CORPUS/train.txt.gz (heldout.txt.gz holds the evaluation
   sentences; --ppl reads it to *measure* perplexity, never to train).
3. Interpolated modified Kneser-Ney (Chen & Goodman: discounts D1, D2, D3+
   per order from the count-of-counts of the adjusted counts; lower orders
   use continuation counts, n-grams that start with <s> their raw counts),
   written as a backoff model: a listed n-gram's probability is the
   interpolated one and a history's backoff weight is its interpolation
   weight, so an unlisted n-gram gets exactly the interpolated probability.
   The unigrams interpolate with the uniform distribution over the
   vocabulary (every unit but <blank> and <sos/eos>, plus </s>), which is
   what an unseen unit such as <unk> gets; <s> has log10 prob -99.
   Pruning: count cutoffs per order (--prune T1,T2,...: n-grams of order k
   with a raw count <= Tk are dropped; the last value repeats for higher
   orders; unigrams are never dropped). A dropped n-gram's probability mass
   goes to its history's backoff weight, so each history stays normalised;
   the prefix and the suffix of every kept n-gram are kept too (raw counts
   with non-decreasing cutoffs do that by themselves; it is enforced anyway).
4. The word model: the same estimator over the whitespace-separated words of
   train.txt.gz; every training word is in its vocabulary (and so in the
   decoder's lexicon), pruning drops only higher-order n-grams.
5. Writes DIR/lm.arpa.gz and DIR/words.arpa.gz (gzip, no timestamp: the
   same input gives the same bytes) and DIR/lm.json; prints the n-gram
   counts per order and the sizes, and fails (exit 3) when a file is larger
   than --max-bytes or --word-max-bytes.

ArpaLm is the reference scorer (standard backoff) for the C++ loader.
"""

import argparse
import gzip
import io
import json
import math
import os
import sys
import tempfile
import time

import numpy as np

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
# Units of units.txt that never are LM words: CTC's blank and WeNet's <sos/eos>.
NON_WORDS = ("<blank>", "<sos/eos>")
MAX_ORDER_BITS = 63
# Chosen by per-unit perplexity (</s> counted) on heldout.txt.gz among
# count-cutoff settings that keep every 1-3-gram and fit 6 MB gzip at 4
# decimals: order 5, 4-grams with count >= 3, 5-grams with count >= 5.
#   order  --prune          MB    ppl      order  --prune          MB    ppl
#   3      0                2.89  15.06    5      0,0,0,2,4        5.97  10.64
#   4      0,0,0,1          6.45  10.81    5      0,0,0,3          5.70  10.68
#   5      0,0,0,2,3        6.34  10.51    6      0,0,0,3,4,5      5.86  10.75
#   6      0,0,0,1,2 (6 dp) 12.2   9.94    6      0,0,0,4          5.67  10.83
#   7      0,0,0,3,4,5,6    6.12  10.75    7      0,0,0,2,5,8,12   6.12  10.84
#   6      0,0,1,2,3,4      5.97  10.51    (prunes trigram singletons)
# A heavily pruned extra order hurts: it turns the order below into
# continuation counts while its own n-grams cover little.
DEFAULT_ORDER = 5
DEFAULT_PRUNE = "0,0,0,2,4"
DEFAULT_PRECISION = 4
DEFAULT_MAX_BYTES = 6_000_000
# The word model: order 2, bigrams seen at least 3 times. On the development
# set (bench/results/lm-tuning.md) orders 2 and 3 with cutoffs 1-2 were within
# a word of each other; what the decoder gains is mostly the lexicon.
DEFAULT_WORD_ORDER = 2
DEFAULT_WORD_PRUNE = "0,2"
DEFAULT_WORD_MAX_BYTES = 1_500_000
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


def parse_prune(spec, order: int):
    """'0,0,0,1' -> a cutoff per order 1..order (the last value repeats)."""
    if isinstance(spec, str):
        values = [int(v) for v in spec.replace(" ", "").split(",") if v != ""]
    else:
        values = [int(v) for v in spec]
    if not values or any(v < 0 for v in values):
        raise ValueError(f"bad --prune {spec!r}: cutoffs are counts >= 0")
    values = (values + [values[-1]] * order)[:order]
    values[0] = 0  # every unigram is listed
    return values


def discounts_from_counts(adjusted: np.ndarray, order: int, log=None):
    """(D1, D2, D3+) of Chen & Goodman from the count-of-counts n1..n4; falls
    back to (0.5, 1.0, 1.5) when they are degenerate (tiny corpora)."""
    n = [int(np.count_nonzero(adjusted == i)) for i in (1, 2, 3, 4)]
    try:
        y = n[0] / (n[0] + 2 * n[1])
        d = (1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2])
        if all(0 < d[i] <= i + 1 for i in range(3)):
            return d
    except ZeroDivisionError:
        pass
    if log:
        log(f"lm: order {order}: count-of-counts {n} give no valid discounts; "
            f"using {FALLBACK_DISCOUNTS}")
    return FALLBACK_DISCOUNTS


class NgramModel:
    """The built model: per order, sorted packed keys of the listed n-grams,
    their log10 probabilities and log10 backoffs (NaN: none)."""

    def __init__(self, words, bits, order, keys, logprobs, backoffs, discounts):
        self.words = words          # id -> word string (id 0 unused)
        self.bits = bits
        self.order = order
        self.keys = keys            # keys[k] for k in 1..order (index 0 unused)
        self.logprobs = logprobs
        self.backoffs = backoffs
        self.discounts = discounts  # discounts[k] = (D1, D2, D3+)

    def counts(self):
        return [len(self.keys[k]) for k in range(1, self.order + 1)]

    def write_arpa(self, path: str, precision: int = 6):
        """Plain ARPA, or gzip when path ends in .gz (no name/time in its header)."""
        if path.endswith(".gz"):
            with open(path, "wb") as raw:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                   compresslevel=9) as gz:
                    with io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as f:
                        self._write(f, precision)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                self._write(f, precision)

    def _write(self, f, precision):
        f.write("\\data\\\n")
        for k in range(1, self.order + 1):
            f.write(f"ngram {k}={len(self.keys[k])}\n")
        mask = (1 << self.bits) - 1
        words = self.words
        fmt = f"{{:.{precision}f}}"
        for k in range(1, self.order + 1):
            f.write(f"\n\\{k}-grams:\n")
            keys = self.keys[k]
            ids = np.empty((len(keys), k), dtype=np.int64)
            for j in range(k):
                ids[:, k - 1 - j] = (keys >> (self.bits * j)) & mask
            probs = [fmt.format(p) for p in self.logprobs[k].tolist()]
            bows = self.backoffs[k].tolist()
            lines = []
            for row, p, b in zip(ids.tolist(), probs, bows):
                text = " ".join([words[i] for i in row])
                if b == b:  # not NaN
                    lines.append(f"{p}\t{text}\t{fmt.format(b)}\n")
                else:
                    lines.append(f"{p}\t{text}\n")
                if len(lines) >= 65536:
                    f.write("".join(lines))
                    lines = []
            f.write("".join(lines))
        f.write("\n\\end\\\n")


def build(sentences, vocab, order: int, prune=None, log=None) -> NgramModel:
    """Interpolated modified Kneser-Ney as a backoff model.

    sentences: iterable of lists of unit strings (a unit outside vocab counts
    as <unk>); vocab: the unit strings the LM predicts (besides </s>; <unk> is
    added when missing); prune: cutoffs per order (see parse_prune)."""
    if order < 1:
        raise ValueError("order must be >= 1")
    cutoffs = parse_prune(prune if prune is not None else [0], order)
    vocab = [w for w in vocab if w not in (BOS, EOS) and w not in NON_WORDS]
    if UNK not in vocab:
        vocab = [UNK] + vocab
    if len(set(vocab)) != len(vocab):
        raise ValueError("duplicate units in the vocabulary")
    for w in vocab:
        if not w or any(c.isspace() for c in w):
            raise ValueError(f"unit {w!r} cannot be an ARPA word")
    words = [None, BOS, EOS] + vocab
    index = {w: i for i, w in enumerate(words) if w is not None}
    bos_id, eos_id, unk_id = index[BOS], index[EOS], index[UNK]
    bits = max(1, (len(words) - 1).bit_length())
    if bits * order > MAX_ORDER_BITS:
        raise ValueError(f"{len(words)} words x order {order} do not fit 63-bit keys")

    # One array of every sentence as <s> u1 .. un </s>; pos = index in its sentence.
    seqs = []
    for s in sentences:
        seqs.append([bos_id] + [index.get(u, unk_id) for u in s] + [eos_id])
    if not seqs:
        raise ValueError("no sentences")
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    tok = np.fromiter((i for s in seqs for i in s), dtype=np.int64, count=int(lens.sum()))
    del seqs
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    pos = np.arange(len(tok), dtype=np.int64) - np.repeat(starts, lens)

    # Raw counts: n-grams of order k end at a word after <s> and do not reach
    # back past their sentence's <s>.
    uniq = [None] * (order + 1)
    raw = [None] * (order + 1)
    key = tok.copy()
    for k in range(1, order + 1):
        if k > 1:
            key[k - 1:] |= tok[:len(tok) - (k - 1)] << (bits * (k - 1))
        valid = pos >= max(1, k - 1)
        uniq[k], raw[k] = np.unique(key[valid], return_counts=True)
    del key, tok, pos

    def mask(k):
        return (1 << (bits * k)) - 1

    def first_word(keys, k):
        return keys >> (bits * (k - 1))

    def lookup(sorted_keys, wanted):
        idx = np.searchsorted(sorted_keys, wanted)
        if len(wanted) and (idx.max() >= len(sorted_keys) or
                            not np.array_equal(sorted_keys[idx], wanted)):
            raise AssertionError("lm: an n-gram's prefix or suffix is missing")
        return idx

    # Adjusted counts: continuation counts N1+(. w) below the top order,
    # except for n-grams that start with <s> (nothing precedes them).
    adjusted = [None] * (order + 1)
    adjusted[order] = raw[order]
    for k in range(order - 1, 0, -1):
        cont_keys, cont = np.unique(uniq[k + 1] & mask(k), return_counts=True)
        a = raw[k].copy()
        inner = first_word(uniq[k], k) != bos_id
        a[inner] = cont[lookup(cont_keys, uniq[k][inner])]
        adjusted[k] = a

    discounts = [None] * (order + 1)
    for k in range(1, order + 1):
        discounts[k] = discounts_from_counts(adjusted[k], k, log)

    # Kept n-grams (raw count cutoffs), closed under prefix and suffix.
    keep = [None] * (order + 1)
    for k in range(1, order + 1):
        keep[k] = raw[k] > cutoffs[k - 1] if k > 1 else np.ones(len(uniq[k]), dtype=bool)
    for k in range(order, 2, -1):  # all unigrams are listed anyway
        kept = uniq[k][keep[k]]
        keep[k - 1][lookup(uniq[k - 1], kept >> bits)] = True
        keep[k - 1][lookup(uniq[k - 1], kept & mask(k - 1))] = True

    # Unigrams: every word is listed; interpolated with the uniform distribution.
    n_words = len(words)
    predicted = np.ones(n_words, dtype=bool)
    predicted[0] = predicted[bos_id] = False
    d = np.array((0.0,) + tuple(discounts[1]))
    a = adjusted[1].astype(np.float64)
    dv = d[np.minimum(adjusted[1], 3)]
    total = a.sum()
    gamma0 = dv.sum() / total
    p1 = np.zeros(n_words)
    p1[predicted] = gamma0 / predicted.sum()
    p1[uniq[1]] += (a - dv) / total
    keys = [None] * (order + 1)
    logprobs = [None] * (order + 1)
    backoffs = [None] * (order + 1)
    keys[1] = np.arange(1, n_words, dtype=np.int64)
    with np.errstate(divide="ignore"):
        lp1 = np.log10(p1)
    lp1[bos_id] = -99.0
    logprobs[1] = lp1[1:]
    backoffs[1] = np.full(n_words - 1, np.nan)

    prob_lower = p1          # order 1: indexed by word id
    for k in range(2, order + 1):
        u, a_int, kp = uniq[k], adjusted[k], keep[k]
        a = a_int.astype(np.float64)
        d = np.array((0.0,) + tuple(discounts[k]))
        dv = d[np.minimum(a_int, 3)]
        hist = u >> bits
        starts = np.flatnonzero(np.concatenate(([True], hist[1:] != hist[:-1])))
        group = np.cumsum(np.concatenate(([False], hist[1:] != hist[:-1])))
        denom = np.add.reduceat(a, starts)
        # Mass left to the lower order: the discounts of kept n-grams and the
        # whole count of dropped ones.
        gamma = np.add.reduceat(np.where(kp, dv, a), starts) / denom
        suffix = u[kp] & mask(k - 1)
        if k == 2:
            lower = prob_lower[suffix]
        else:
            lower = prob_lower[lookup(keys[k - 1], suffix)]
        g = group[kp]
        p = (a[kp] - dv[kp]) / denom[g] + gamma[g] * lower
        keys[k] = u[kp]
        logprobs[k] = np.log10(p)
        backoffs[k] = np.full(len(keys[k]), np.nan)
        # Backoff weight of a history = its interpolation weight (listed on
        # histories with a kept extension).
        has_kept = np.add.reduceat(kp.astype(np.int64), starts) > 0
        hkeys = hist[starts][has_kept]
        if k == 2:
            backoffs[1][hkeys - 1] = np.log10(gamma[has_kept])
        else:
            backoffs[k - 1][lookup(keys[k - 1], hkeys)] = np.log10(gamma[has_kept])
        prob_lower = p
    return NgramModel(words, bits, order, keys, logprobs, backoffs, discounts)


class ArpaLm:
    """An ARPA model (plain or gzip) with standard backoff scoring, log10."""

    def __init__(self, path: str):
        opener = gzip.open if path.endswith(".gz") else open
        self.ngrams = {}   # tuple of words -> (log10 prob, log10 backoff)
        self.counts = []
        self.has_backoff = set()
        order = 0
        section = None
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                if line == "\\data\\":
                    section = "data"
                    continue
                if line == "\\end\\":
                    section = "end"
                    break
                if line.startswith("\\") and line.endswith("-grams:"):
                    order = int(line[1:-len("-grams:")])
                    section = "grams"
                    continue
                if section == "data":
                    if not line.startswith("ngram "):
                        raise ValueError(f"{path}: bad header line {line!r}")
                    n, c = line[len("ngram "):].split("=")
                    if int(n) != len(self.counts) + 1:
                        raise ValueError(f"{path}: header orders out of sequence")
                    self.counts.append(int(c))
                elif section == "grams":
                    parts = line.split()
                    if len(parts) == order + 1:
                        prob, bow = float(parts[0]), 0.0
                    elif len(parts) == order + 2:
                        prob, bow = float(parts[0]), float(parts[-1])
                    else:
                        raise ValueError(f"{path}: bad {order}-gram line {line!r}")
                    ngram = tuple(parts[1:order + 1])
                    self.ngrams[ngram] = (prob, bow)
                    if len(parts) == order + 2:
                        self.has_backoff.add(ngram)
                else:
                    raise ValueError(f"{path}: unexpected line {line!r}")
        if section != "end":
            raise ValueError(f"{path}: no \\end\\")
        self.order = len(self.counts)
        found = [0] * self.order
        for ngram in self.ngrams:
            found[len(ngram) - 1] += 1
        if found != self.counts:
            raise ValueError(f"{path}: header counts {self.counts} but {found} n-grams")
        self.vocab = [g[0] for g in self.ngrams if len(g) == 1]
        if (UNK,) not in self.ngrams:
            raise ValueError(f"{path}: no <unk> unigram")

    def score(self, history, unit) -> float:
        """log10 P(unit | history); history: the preceding units, usually
        starting with <s>. Words the model lacks count as <unk>."""
        ngrams = self.ngrams
        if (unit,) not in ngrams:
            unit = UNK
        hist = tuple(h if (h,) in ngrams else UNK for h in history)
        if self.order > 1:
            hist = hist[len(hist) - (self.order - 1):] if len(hist) > self.order - 1 else hist
        else:
            hist = ()
        backoff = 0.0
        for start in range(len(hist) + 1):
            ctx = hist[start:]
            entry = ngrams.get(ctx + (unit,))
            if entry is not None:
                return backoff + entry[0]
            ctx_entry = ngrams.get(ctx)
            if ctx_entry is not None:
                backoff += ctx_entry[1]
        raise AssertionError("unreachable: every word has a unigram")

    def sentence_logprob(self, units) -> float:
        """log10 P(units, </s> | <s>)."""
        history = [BOS]
        total = 0.0
        for u in list(units) + [EOS]:
            total += self.score(history, u)
            history.append(u)
        return total

    def perplexity(self, sentences):
        """(per-unit perplexity counting </s>, log10 sum, predicted tokens)."""
        total, n = 0.0, 0
        for units in sentences:
            total += self.sentence_logprob(units)
            n += len(units) + 1
        return 10 ** (-total / n), total, n


def build_words(lines, order: int, prune=None, log=None) -> NgramModel:
    """The word model: every word of `lines` (whitespace-separated) is in its
    vocabulary."""
    sentences = [line.split() for line in lines]
    vocab = sorted({w for s in sentences for w in s})
    return build(sentences, vocab, order, prune, log)


def read_units(path: str):
    units = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            unit, idx = line.rstrip("\n").rsplit(" ", 1)
            if int(idx) != n:
                raise ValueError(f"{path}: line {n + 1} has id {idx}")
            units.append(unit)
    return units


def load_tokenizer(model_dir: str, tokenizer_dir, corpus: str, work: str):
    """The model's tokenizer: --tokenizer DIR, or a reproduction of
    tools/train/tokenizer.py in `work`; exits unless its units.txt is the
    model's, byte for byte."""
    from tools.train.corpus import read_lines
    from tools.train.tokenizer import Tokenizer, train_bpe
    model_units = os.path.join(model_dir, "units.txt")
    with open(model_units, "rb") as f:
        want = f.read()
    if tokenizer_dir:
        bpe = os.path.join(tokenizer_dir, "bpe.model")
        units_path = os.path.join(tokenizer_dir, "units.txt")
        with open(units_path, "rb") as f:
            given = f.read()
        if given != want:
            sys.exit(f"lm: {units_path} differs from {model_units}: this tokenizer is "
                     f"not the model's; refusing to build an LM over other units")
    else:
        vocab = want.count(b"\n") - 2  # units = <blank> + pieces + <sos/eos>
        prefix = os.path.join(work, "bpe")
        train_bpe(read_lines(os.path.join(corpus, "train.txt.gz")), prefix, vocab)
        bpe = prefix + ".model"
    tok = Tokenizer(bpe)
    units_path = os.path.join(work, "units.txt")
    tok.write_units(units_path)
    with open(units_path, "rb") as f:
        got = f.read()
    if got != want:
        sys.exit(f"lm: the tokenizer's units ({units_path} from {bpe}) differ from "
                 f"{model_units}; the model was not trained with this tokenizer "
                 f"(pass --tokenizer with its bpe.model and units.txt); refusing")
    return tok


def tokenize(tok, lines):
    units = tok.units
    return [[units[i] for i in tok.encode(line)] for line in lines]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--corpus", required=True, help="folder with train.txt.gz (heldout.txt.gz for --ppl)")
    p.add_argument("--model", required=True, help="model folder whose units.txt the LM's words are")
    p.add_argument("--out", required=True)
    p.add_argument("--order", type=int, default=DEFAULT_ORDER)
    p.add_argument("--prune", default=DEFAULT_PRUNE,
                   help="count cutoffs per order, comma-separated: an n-gram of order k "
                        "with raw count <= Tk is dropped; the last repeats (default %(default)s)")
    p.add_argument("--tokenizer", help="folder with bpe.model and units.txt (default: retrain)")
    # The bundled model's values: the best on a development set of held-out
    # sentences that are neither evaluation nor sample sentences (docs/model.md).
    p.add_argument("--weight", type=float, default=1.0, help="lm.json weight (shallow fusion)")
    p.add_argument("--token-bonus", type=float, default=2.0, help="lm.json token_bonus")
    p.add_argument("--precision", type=int, default=DEFAULT_PRECISION,
                   help="decimals of the log10 values (default %(default)s)")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                   help="fail when lm.arpa.gz is larger (default %(default)s)")
    p.add_argument("--word-order", type=int, default=DEFAULT_WORD_ORDER)
    p.add_argument("--word-prune", default=DEFAULT_WORD_PRUNE,
                   help="the word model's count cutoffs (as --prune; default %(default)s)")
    p.add_argument("--no-words", action="store_true", help="no word model")
    p.add_argument("--word-weight", type=float, default=0.2, help="lm.json words.weight")
    p.add_argument("--word-bonus", type=float, default=0.0, help="lm.json words.word_bonus")
    p.add_argument("--unknown-word-penalty", type=float, default=6.0,
                   help="lm.json words.unknown_word_penalty")
    p.add_argument("--word-max-bytes", type=int, default=DEFAULT_WORD_MAX_BYTES,
                   help="fail when words.arpa.gz is larger (default %(default)s)")
    p.add_argument("--ppl", action="store_true",
                   help="then measure per-unit (per-word) perplexity on CORPUS/heldout.txt.gz "
                        "(not trained on)")
    a = p.parse_args(argv)
    if not 1 <= a.order <= 7:
        p.error("--order must be 1..7")
    if not 1 <= a.word_order <= 3:
        p.error("--word-order must be 1..3")
    from tools.train.corpus import read_lines

    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lm_tok_") as work:
        tok = load_tokenizer(a.model, a.tokenizer, a.corpus, work)
    train_path = os.path.join(a.corpus, "train.txt.gz")
    sentences = tokenize(tok, read_lines(train_path))
    n_tokens = sum(len(s) for s in sentences)
    print(f"lm: {len(sentences)} sentences, {n_tokens} units from {train_path} "
          f"({time.time() - t0:.1f} s)", flush=True)
    vocab = [u for u in tok.units if u not in NON_WORDS]
    cutoffs = parse_prune(a.prune, a.order)
    model = build(sentences, vocab, a.order, cutoffs, log=print)
    del sentences
    for k in range(1, a.order + 1):
        d = ", ".join(f"{x:.3f}" for x in model.discounts[k])
        print(f"lm: order {k}: cutoff {cutoffs[k - 1]}, discounts ({d})")
    def write(model, name, what, order, cutoffs, max_bytes, flags):
        """Writes OUT/name, prints its counts and size; (path, counts, too_big)."""
        path = os.path.join(a.out, name)
        model.write_arpa(path, a.precision)
        counts = model.counts()
        size = os.path.getsize(path)
        print(f"lm: {what}: order {order}, prune {','.join(map(str, cutoffs))}: ngrams "
              + " ".join(f"{k}={c}" for k, c in enumerate(counts, 1))
              + f" (total {sum(counts)}); {path}: {size} bytes ({size / 1e6:.2f} MB); "
              f"{time.time() - t0:.1f} s", flush=True)
        if size > max_bytes:
            print(f"lm: {path} is {size} bytes, over {flags[0]} {max_bytes}: raise {flags[1]} "
                  f"or lower {flags[2]}", file=sys.stderr)
        return path, counts, size > max_bytes

    arpa, counts, too_big = write(model, "lm.arpa.gz", "units", a.order, cutoffs, a.max_bytes,
                                  ("--max-bytes", "--prune", "--order"))
    spec = {"file": "lm.arpa.gz", "order": a.order, "units": "units.txt",
            "weight": a.weight, "token_bonus": a.token_bonus,
            "built_from": "tools/train/corpus/train.txt.gz", "ngrams": counts}
    words_arpa = os.path.join(a.out, "words.arpa.gz")
    if not a.no_words:
        word_cutoffs = parse_prune(a.word_prune, a.word_order)
        words = build_words(read_lines(train_path), a.word_order, word_cutoffs, log=print)
        words_arpa, word_counts, words_too_big = write(
            words, "words.arpa.gz", "words", a.word_order, word_cutoffs, a.word_max_bytes,
            ("--word-max-bytes", "--word-prune", "--word-order"))
        too_big = too_big or words_too_big
        spec["words"] = {"file": "words.arpa.gz", "order": a.word_order,
                         "weight": a.word_weight, "word_bonus": a.word_bonus,
                         "unknown_word_penalty": a.unknown_word_penalty, "ngrams": word_counts}
    elif os.path.exists(words_arpa):
        os.remove(words_arpa)  # lm.json below no longer names it
    with open(os.path.join(a.out, "lm.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
    if a.ppl:
        heldout_lines = read_lines(os.path.join(a.corpus, "heldout.txt.gz"))
        heldout = tokenize(tok, heldout_lines)
        ppl, logprob, n = ArpaLm(arpa).perplexity(heldout)
        print(f"lm: heldout: {len(heldout)} sentences, {n} units (with </s>): "
              f"log10 prob {logprob:.1f}, per-unit perplexity {ppl:.3f}", flush=True)
        if not a.no_words:
            ppl, logprob, n = ArpaLm(words_arpa).perplexity([l.split() for l in heldout_lines])
            print(f"lm: heldout: {n} words (with </s>, unknown ones as <unk>): "
                  f"log10 prob {logprob:.1f}, per-word perplexity {ppl:.3f}", flush=True)
    return 3 if too_big else 0


if __name__ == "__main__":
    sys.exit(main())
