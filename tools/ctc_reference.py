#!/usr/bin/python3
"""Straightforward CTC decoding reference for decoder/ (tests only).

An independent, deliberately plain implementation of what the C++ decoder
computes: greedy decoding and CTC prefix beam search with WeNet's semantics,
prefixes held as tuples in dicts, token times copied as tuples, and the
phrase-boosting bonus recomputed from its definition for every prefix (no
automaton). Pure Python in float64; run with /usr/bin/python3.

Usage: ctc_reference.py INPUT.json OUTPUT.json

INPUT:  {"log_probs": [[float, ...], ...],        # [T][V]
         "beam_size": 10, "first_beam_size": 10, "blank_id": 0,
         "blank_skip_threshold": 0.0,              # 0 = off
         "phrases": [{"tokens": [int, ...], "boost": float}, ...]}
OUTPUT: {"beam": [hypothesis, ...] (best first, after finalisation),
         "greedy": hypothesis}
hypothesis = {"tokens", "frames", "log_probs", "score", "ctc_score",
              "context_score", "viterbi_score"}

Determinism rules shared with the C++ search: tokens are expanded best first
(ties to the lower id); kept prefixes are visited best first; a Viterbi score
must be strictly better to replace an earlier one; candidates with equal
totals keep the order in which they were first reached (dict insertion order
and a stable sort); prefixes with probability 0 are dropped.
"""

import json
import math
import sys

NEG_INF = float("-inf")


def log_add(x, y):
    if x < y:
        x, y = y, x
    if y == NEG_INF:
        return x
    return x + math.log1p(math.exp(y - x))


class Phrases:
    """The phrase bonus by definition (see decoder/context_graph.h)."""

    def __init__(self, phrases):
        self.end_score = {}     # phrase -> boost * length (largest over duplicates)
        self.prefix_boost = {}  # non-empty phrase prefix -> largest boost through it
        self.inner = {()}       # proper prefixes of phrases (automaton states)
        for tokens, boost in phrases:
            self.end_score[tokens] = max(self.end_score.get(tokens, 0.0), boost * len(tokens))
            for i in range(1, len(tokens) + 1):
                self.prefix_boost[tokens[:i]] = max(self.prefix_boost.get(tokens[:i], 0.0), boost)
            for i in range(len(tokens)):
                self.inner.add(tokens[:i])

    def committed(self, x):
        total = 0.0
        for j in range(1, len(x) + 1):
            for phrase, score in self.end_score.items():
                if len(phrase) <= j and x[j - len(phrase):j] == phrase:
                    total += score
        return total

    def pending(self, x):
        for start in range(len(x) + 1):  # longest suffix first
            suffix = x[start:]
            if suffix in self.inner:
                return sum(self.prefix_boost[suffix[:i]] for i in range(1, len(suffix) + 1))
        return 0.0

    def bonus(self, x, final):
        if not self.end_score:
            return 0.0
        return self.committed(x) + (0.0 if final else self.pending(x))


class Prefix:
    def __init__(self, s=NEG_INF, ns=NEG_INF, v_s=NEG_INF, v_ns=NEG_INF):
        self.s, self.ns, self.v_s, self.v_ns = s, ns, v_s, v_ns
        self.times_s = ()   # ((frame, best log-prob of the run), ...) per token
        self.times_ns = ()

    def score(self):
        return log_add(self.s, self.ns)

    def viterbi(self):
        return self.v_s if self.v_s > self.v_ns else self.v_ns

    def times(self):
        return self.times_s if self.v_s > self.v_ns else self.times_ns


def top_k(row, k):
    return sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]


def prefix_beam_search(log_probs, beam_size, first_beam_size, blank, skip_threshold, phrases):
    hyps = [((), Prefix(s=0.0, v_s=0.0))]
    skip_log = math.log(skip_threshold) if skip_threshold > 0 else math.inf
    for t, row in enumerate(log_probs):
        if row[blank] >= skip_log:
            tokens = [blank]  # the documented meaning of skipping a frame
        else:
            tokens = top_k(row, min(first_beam_size, len(row)))
        nxt = {}
        for token in tokens:
            lp = row[token]
            for prefix, h in hyps:
                if token == blank:
                    c = nxt.setdefault(prefix, Prefix())
                    c.s = log_add(c.s, h.score() + lp)
                    c.v_s = h.viterbi() + lp
                    c.times_s = h.times()
                elif prefix and prefix[-1] == token:
                    c = nxt.setdefault(prefix, Prefix())
                    c.ns = log_add(c.ns, h.ns + lp)
                    if h.v_ns + lp > c.v_ns:
                        c.v_ns = h.v_ns + lp
                        last = h.times_ns[-1]
                        c.times_ns = h.times_ns[:-1] + ((t, max(last[1], lp)),)
                    longer = prefix + (token,)
                    c = nxt.setdefault(longer, Prefix())
                    c.ns = log_add(c.ns, h.s + lp)
                    if h.v_s + lp > c.v_ns:
                        c.v_ns = h.v_s + lp
                        c.times_ns = h.times_s + ((t, lp),)
                else:
                    longer = prefix + (token,)
                    c = nxt.setdefault(longer, Prefix())
                    c.ns = log_add(c.ns, h.score() + lp)
                    if h.viterbi() + lp > c.v_ns:
                        c.v_ns = h.viterbi() + lp
                        c.times_ns = h.times() + ((t, lp),)
        scored = []
        for prefix, c in nxt.items():
            total = c.score() + phrases.bonus(prefix, final=False)
            if total > NEG_INF:
                scored.append((total, prefix, c))
        if not scored:
            continue
        scored.sort(key=lambda item: -item[0])  # stable
        hyps = [(prefix, c) for _, prefix, c in scored[:beam_size]]
    finals = [(h.score() + phrases.bonus(prefix, final=True), prefix, h) for prefix, h in hyps]
    finals.sort(key=lambda item: -item[0])
    out = []
    for total, prefix, h in finals:
        times = h.times()
        out.append({
            "tokens": list(prefix),
            "frames": [frame for frame, _ in times],
            "log_probs": [lp for _, lp in times],
            "score": total,
            "ctc_score": h.score(),
            "context_score": phrases.bonus(prefix, final=True),
            "viterbi_score": h.viterbi(),
        })
    return out


def greedy_search(log_probs, blank):
    tokens, frames, lps = [], [], []
    previous = -1
    score = 0.0
    for t, row in enumerate(log_probs):
        best = top_k(row, 1)[0]
        score += row[best]
        if best != blank:
            if best == previous:
                frames[-1] = t
                lps[-1] = max(lps[-1], row[best])
            else:
                tokens.append(best)
                frames.append(t)
                lps.append(row[best])
        previous = best
    return {"tokens": tokens, "frames": frames, "log_probs": lps, "score": score,
            "ctc_score": score, "context_score": 0.0, "viterbi_score": score}


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as f:
        spec = json.load(f)
    log_probs = spec["log_probs"]
    blank = spec.get("blank_id", 0)
    phrases = Phrases([(tuple(p["tokens"]), p["boost"]) for p in spec.get("phrases", [])])
    result = {
        "beam": prefix_beam_search(log_probs, spec.get("beam_size", 10),
                                   spec.get("first_beam_size", 10), blank,
                                   spec.get("blank_skip_threshold", 0.0), phrases),
        "greedy": greedy_search(log_probs, blank),
    }
    with open(argv[2], "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
