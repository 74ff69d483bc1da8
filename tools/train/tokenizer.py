"""BPE tokenizer (sentencepiece) and the model directory's units.txt.

Unit ids: 0 <blank>, 1 <unk>, 2 .. V-2 the sentencepiece pieces (sentencepiece
id + 1; "▁" marks a word start), V-1 <sos/eos> (WeNet's layout, which
docs/model-format.md asks for). Sentencepiece's own <unk> is its id 0, so
every unit id is simply its sentencepiece id + 1.

    python3 -m tools.train.tokenizer --corpus tools/train/corpus --out DIR --vocab 256
writes DIR/bpe.model and DIR/units.txt.
"""

import argparse
import os
import random
import tempfile

import sentencepiece as spm

from tools.train.corpus import read_lines

BLANK, UNK = "<blank>", "<unk>"
SOS_EOS = "<sos/eos>"
WORD_START = "\u2581"


def train_bpe(sentences, model_prefix: str, vocab: int, max_sentences: int = 200000,
              seed: int = 1):
    """Trains a BPE model of `vocab` pieces (including sentencepiece's unk)."""
    rng = random.Random(seed)
    sample = sentences if len(sentences) <= max_sentences else rng.sample(sentences, max_sentences)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(sample) + "\n")
        path = f.name
    try:
        spm.SentencePieceTrainer.train(
            input=path, model_prefix=model_prefix, vocab_size=vocab, model_type="bpe",
            character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,
            num_threads=os.cpu_count() or 1, minloglevel=2)
    finally:
        os.remove(path)


class Tokenizer:
    """Text <-> unit ids of a trained BPE model (thread-compatible)."""

    def __init__(self, bpe_model: str):
        self.sp = spm.SentencePieceProcessor(model_file=bpe_model)
        self.units = ([BLANK, UNK] + [self.sp.id_to_piece(i) for i in range(1, self.sp.get_piece_size())]
                      + [SOS_EOS])

    @property
    def vocab_size(self) -> int:
        return len(self.units)

    def encode(self, text: str):
        return [i + 1 for i in self.sp.encode(text)]

    def decode(self, ids) -> str:
        """Unit ids (no blanks) -> text; <unk> and <sos/eos> are dropped."""
        pieces = [self.units[i] for i in ids if 1 < i < len(self.units) - 1]
        return "".join(pieces).replace(WORD_START, " ").strip()

    def write_units(self, path: str):
        with open(path, "w", encoding="utf-8") as f:
            for i, u in enumerate(self.units):
                f.write(f"{u} {i}\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--vocab", type=int, default=256)
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    prefix = os.path.join(a.out, "bpe")
    train_bpe(read_lines(os.path.join(a.corpus, "train.txt.gz")), prefix, a.vocab)
    tok = Tokenizer(prefix + ".model")
    tok.write_units(os.path.join(a.out, "units.txt"))
    print(f"tokenizer: {tok.vocab_size} units -> {a.out}")


if __name__ == "__main__":
    main()
