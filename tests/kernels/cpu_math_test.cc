// The CPU building blocks under the ops: the sinusoid, the segment attention
// primitive, the packed Linear kernels and the vectorised exp.
#include "kernels/cpu_math.h"

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/packed_linear.h"
#include "kernels/rel_pos_attention.h"

namespace oasr::kernels {
namespace {

TEST(SinusoidRowTest, InterleavedSinCos) {
  std::vector<float> row(8);
  SinusoidRow(7, 8, row.data());
  for (int i = 0; i < 4; ++i) {
    const double w = std::exp(-2.0 * i * std::log(10000.0) / 8);
    EXPECT_NEAR(row[2 * i], std::sin(7 * w), 1e-6);
    EXPECT_NEAR(row[2 * i + 1], std::cos(7 * w), 1e-6);
  }
}

// Splitting keys and positions into segments anywhere must not change the
// result: the property the paged and cohort paths rely on.
TEST(RelPosAttentionTest, SegmentationInvariant) {
  const int64_t q = 3, dk = 4, t = 7;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto fill = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  std::vector<float> qu = fill(q * dk), qv = fill(q * dk), kv = fill(t * 2 * dk), p = fill(t * dk);
  auto run = [&](std::vector<int64_t> kv_cuts, std::vector<int64_t> pos_cuts) {
    std::vector<KvSegment> ks;
    std::vector<PosSegment> ps;
    for (size_t i = 0; i + 1 < kv_cuts.size(); ++i) {
      const float* base = kv.data() + kv_cuts[i] * 2 * dk;
      ks.push_back({base, base + dk, kv_cuts[i + 1] - kv_cuts[i], 2 * dk});
    }
    for (size_t i = 0; i + 1 < pos_cuts.size(); ++i) {
      ps.push_back({p.data() + pos_cuts[i] * dk, pos_cuts[i + 1] - pos_cuts[i], dk});
    }
    std::vector<float> out(q * dk), scores(q * t);
    RelPosAttentionParams prm;
    prm.q_u = qu.data();
    prm.q_v = qv.data();
    prm.ldq = dk;
    prm.queries = q;
    prm.d_k = dk;
    prm.kv = ks.data();
    prm.num_kv = static_cast<int>(ks.size());
    prm.pos = ps.data();
    prm.num_pos = static_cast<int>(ps.size());
    prm.out = out.data();
    prm.ldo = dk;
    prm.scores = scores.data();
    RelPosAttentionCpu(prm);
    return out;
  };
  const std::vector<float> whole = run({0, t}, {0, t});
  // Naive reference.
  for (int64_t i = 0; i < q; ++i) {
    std::vector<double> s(t);
    double mx = -1e30, sum = 0;
    for (int64_t j = 0; j < t; ++j) {
      for (int64_t c = 0; c < dk; ++c)
        s[j] += qu[i * dk + c] * kv[j * 2 * dk + c] + qv[i * dk + c] * p[j * dk + c];
      s[j] /= std::sqrt(static_cast<double>(dk));
      mx = std::max(mx, s[j]);
    }
    for (double& v : s) sum += (v = std::exp(v - mx));
    for (int64_t c = 0; c < dk; ++c) {
      double o = 0;
      for (int64_t j = 0; j < t; ++j) o += s[j] / sum * kv[j * 2 * dk + dk + c];
      EXPECT_NEAR(whole[i * dk + c], o, 1e-5);
    }
  }
  const std::vector<float> split = run({0, 2, 3, t}, {0, 5, t});
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(whole[i], split[i], 1e-6);
}

// Every kernel family against a plain loop, for row counts around the
// register tiles, ragged output panels, strided rows and accumulation.
TEST(PackedLinearTest, MatchesNaiveProduct) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto [out, in] : {std::pair<int64_t, int64_t>{70, 33}, {32, 8}, {5, 300}}) {
    std::vector<float> weight(out * in), bias(out);
    for (float& v : weight) v = dist(rng);
    for (float& v : bias) v = dist(rng);
    const PackedLinear packed(weight.data(), bias.data(), out, in);
    for (auto isa :
         {PackedLinear::Isa::kAvx512, PackedLinear::Isa::kAvx2, PackedLinear::Isa::kPortable}) {
      if (!cpu::IsaSupported(isa)) continue;
      for (int64_t m : {1, 2, 3, 4, 11, 12, 13, 25, 40}) {
        const int64_t ldx = in + 3, ldy = out + 5;
        std::vector<float> x(m * ldx), y(m * ldy), y0(m * ldy);
        for (float& v : x) v = dist(rng);
        for (float& v : y) v = dist(rng);
        y0 = y;
        packed.ForwardPanels(x.data(), m, ldx, y.data(), ldy, /*accumulate=*/true, 0,
                             packed.num_panels(), isa);
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t n = 0; n < out; ++n) {
            double ref = y0[r * ldy + n] + bias[n];
            for (int64_t k = 0; k < in; ++k) ref += x[r * ldx + k] * weight[n * in + k];
            ASSERT_NEAR(y[r * ldy + n], ref, 1e-4)
                << static_cast<int>(isa) << " m " << m << " n " << n;
          }
          // Columns past `out` in the padded row stay untouched.
          for (int64_t n = out; n < ldy; ++n) ASSERT_EQ(y[r * ldy + n], y0[r * ldy + n]);
        }
      }
    }
  }
}

TEST(CpuMathTest, ExpVecIsAccurate) {
  std::vector<float> x;
  for (float v = -87.0f; v < 88.5f; v += 0.0137f) x.push_back(v);
  x.push_back(0.0f);
  for (auto isa : {cpu::Isa::kAvx512, cpu::Isa::kAvx2, cpu::Isa::kPortable}) {
    if (!cpu::IsaSupported(isa)) continue;
    std::vector<float> y(x.size());
    cpu::ExpVec(x.data(), y.data(), static_cast<int64_t>(x.size()), isa);
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = std::exp(static_cast<double>(x[i]));
      ASSERT_NEAR(y[i] / ref, 1.0, 3e-7) << x[i] << " isa " << static_cast<int>(isa);
    }
  }
  std::vector<float> s = {-20.0f, -1.0f, 0.0f, 2.5f, 30.0f};
  std::vector<float> want;
  for (float v : s)
    want.push_back(static_cast<float>(v / (1.0 + std::exp(-static_cast<double>(v)))));
  cpu::SwishInPlace(s.data(), static_cast<int64_t>(s.size()));
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], want[i], 1e-6f * (1 + std::abs(want[i])));
}

}  // namespace
}  // namespace oasr::kernels
