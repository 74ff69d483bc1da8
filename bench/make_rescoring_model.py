"""Writes a model directory of realistic size with an attention decoder, for
oasr-bench-rescoring: the bundled model's encoder geometry (12 x 256 x 2048,
V = 5002) with random weights, and a U2++ bitransformer decoder of WeNet's
recipe size (4 heads, 2048 units, 6 left-to-right and 3 right-to-left
blocks). The weights are random: this measures cost, not accuracy.

  python3 -B -m bench.make_rescoring_model OUT_DIR
"""
import argparse

from tools.reference import decoder as attention
from tools.reference import model_dir
from tools.reference.model import ConformerCtcModel, ModelConfig, randomize_


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    args = parser.parse_args()
    cfg = ModelConfig()
    model = randomize_(ConformerCtcModel(cfg), 7)
    dcfg = attention.DecoderConfig("bitransformer", 4, 2048, 6, 3)
    module = randomize_(attention.build_decoder(dcfg, cfg.output_dim, cfg.output_size), 8)
    sos = eos = cfg.output_dim - 1
    model_dir.write_model_dir(model, args.out, decoder=model_dir.AttentionDecoder(
        dcfg, module, sos, eos, model_dir.Rescoring(0.5, 0.3, 1.0)))


if __name__ == "__main__":
    main()
