// The paged relative-position attention cases of the backend harness.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "common/status.h"
#include "common/tensor.h"
#include "kernels/activation.h"
#include "kernels/causal_conv.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/rel_pos_attention.h"
#include "kernels/residual_add.h"
#include "kernels/softmax.h"
#include "tests/kernels/backend_ops.h"
#include "tests/kernels/backend_ops_internal.h"

namespace oasr::kernels::testing {

// --- paged relative-position attention ------------------------------------------

OpCase PagedAttentionCase(const std::string& name, AttentionShape s) {
  OpCase c;
  c.op = "paged_attention";
  c.name = name;
  const int batch = static_cast<int>(s.history.size());
  const int dk = 64, d = s.heads * dk, bs = s.block_size;
  // Each row's blocks: shuffled physical ids over a pool with spare blocks.
  std::vector<int32_t> need(batch);
  int width = 1, total = 0;
  for (int b = 0; b < batch; ++b) {
    need[b] = (s.history[b] + s.frames[b] + bs - 1) / bs;
    width = std::max(width, need[b]);
    total += need[b];
  }
  const int num_blocks = total + 5;
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  const int rows = batch + 2;  // Slots past the cohort stay unused.
  std::vector<int32_t> slots(batch), table(static_cast<size_t>(rows) * width, 0), lens(rows, 0);
  // Distinct slots in no particular order.
  std::vector<int32_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(11));
  int next = 0;
  for (int b = 0; b < batch; ++b) {
    slots[b] = order[b];
    lens[slots[b]] = s.history[b];
    for (int j = 0; j < need[b]; ++j) table[slots[b] * width + j] = ids[next++];
  }
  int64_t max_end = 0;
  for (int b = 0; b < batch; ++b) max_end = std::max<int64_t>(max_end, s.offsets[b] + s.frames[b]);
  const int64_t pos_rows = std::min<int64_t>(s.pos_rows, max_end);
  const int64_t pool = int64_t{num_blocks} * bs * d;
  const DType fp8 = DType::kFloat8E4M3;
  c.inputs = [=](uint64_t seed) {
    std::mt19937_64 rng(seed);
    Values in{{"qkv", Random(rng, int64_t{batch} * s.chunk * 3 * d)},
              {"u", Random(rng, d, 0.2f)},
              {"v", Random(rng, d, 0.2f)},
              {"k_pool", Random(rng, pool)},
              {"v_pool", Random(rng, pool)},
              {"pos", Random(rng, pos_rows * d)},
              {"linear_pos", Random(rng, int64_t{d} * d, 1.0f / 16)}};
    if (s.fp8_pool) {  // The history as the pool holds it.
      for (const char* name : {"k_pool", "v_pool"}) {
        for (float& x : in.at(name)) x = RoundTo(fp8, x);
      }
    }
    return in;
  };
  if (s.fp8_pool) {
    c.supported = [](const Backend& be) {
      return !be.ctx->is_cuda() || be.dtype != DType::kFloat32;
    };
  }
  const auto pool_dtype = [=](const Backend& be) { return s.fp8_pool ? fp8 : be.dtype; };
  c.low = {"qkv", "k_pool", "v_pool", "pos"};
  c.make = [=](const Backend& be, const Values& v) -> absl::StatusOr<std::unique_ptr<OpInstance>> {
    auto inst = std::make_unique<Instance>(be);
    OASR_RETURN_IF_ERROR(inst->Add("qkv", v.at("qkv"), be.dtype));
    OASR_RETURN_IF_ERROR(inst->Add("pos", v.at("pos"), be.dtype));
    for (const char* name : {"u", "v", "linear_pos"}) {
      OASR_RETURN_IF_ERROR(inst->Add(name, v.at(name), DType::kFloat32));
    }
    OASR_RETURN_IF_ERROR(inst->Add("k_pool", v.at("k_pool"), pool_dtype(be)));
    OASR_RETURN_IF_ERROR(inst->Add("v_pool", v.at("v_pool"), pool_dtype(be)));
    inst->outputs = {"k_pool", "v_pool"};
    OASR_RETURN_IF_ERROR(inst->AddOutput("out", int64_t{batch} * s.chunk * d, be.dtype));
    OASR_RETURN_IF_ERROR(inst->AddInts("slots", slots));
    OASR_RETURN_IF_ERROR(inst->AddInts("frames", s.frames));
    OASR_RETURN_IF_ERROR(inst->AddInts("offsets", s.offsets));
    OASR_RETURN_IF_ERROR(inst->AddInts("table", table));
    OASR_RETURN_IF_ERROR(inst->AddInts("lens", lens));
    Instance* raw = inst.get();
    const std::vector<float> k0 = v.at("k_pool"), v0 = v.at("v_pool");
    inst->run = [=](bool restore) {
      if (restore) {
        OASR_ASSIGN_OR_RETURN(Buf fk, Upload(*be.ctx, k0, pool_dtype(be)));
        OASR_ASSIGN_OR_RETURN(Buf fv, Upload(*be.ctx, v0, pool_dtype(be)));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("k_pool").t.view(), fk.t.view()));
        OASR_RETURN_IF_ERROR(CopyTensor(raw->bufs.at("v_pool").t.view(), fv.t.view()));
      }
      PagedAttentionParams p;
      p.qkv = raw->ptr("qkv");
      p.ld_qkv = 3 * d;
      p.dtype = be.dtype;
      p.pos_bias_u = raw->f32("u");
      p.pos_bias_v = raw->f32("v");
      p.k_pool = raw->ptr("k_pool");
      p.v_pool = raw->ptr("v_pool");
      p.pool_fp8 = s.fp8_pool;
      p.num_blocks = num_blocks;
      p.block_size = bs;
      p.block_table = raw->ints("table");
      p.table_stride = width;
      p.cache_lens = raw->ints("lens");
      p.slots = raw->ints("slots");
      p.frames = raw->ints("frames");
      p.offsets = raw->ints("offsets");
      p.pos_table = raw->ptr("pos");
      p.pos_dtype = be.dtype;
      p.pos_rows = pos_rows;
      p.linear_pos = raw->f32("linear_pos");
      p.out = raw->ptr("out");
      p.ldo = d;
      p.batch = batch;
      p.chunk = s.chunk;
      p.heads = s.heads;
      p.d_k = dk;
      return PagedAttention(*be.ctx, p);
    };
    return std::unique_ptr<OpInstance>(std::move(inst));
  };
  c.reference = [=](const Values& v) {
    Reference ref;
    std::vector<double> kp = ToDouble(v.at("k_pool")), vp = ToDouble(v.at("v_pool"));
    std::vector<double> out(static_cast<size_t>(int64_t{batch} * s.chunk * d), 0.0);
    const auto& qkv = v.at("qkv");
    auto at = [&](int slot, int pos, int h) {
      return ((static_cast<int64_t>(table[slot * width + pos / bs]) * bs + pos % bs) * s.heads +
              h) *
             dk;
    };
    std::vector<float> pe(d);
    for (int b = 0; b < batch; ++b) {
      const int t1 = s.history[b], f = s.frames[b], slot = slots[b];
      for (int i = 0; i < f; ++i) {
        for (int h = 0; h < s.heads; ++h) {
          for (int e = 0; e < dk; ++e) {
            kp[at(slot, t1 + i, h) + e] = qkv[(int64_t{b} * s.chunk + i) * 3 * d + d + h * dk + e];
            vp[at(slot, t1 + i, h) + e] =
                qkv[(int64_t{b} * s.chunk + i) * 3 * d + 2 * d + h * dk + e];
          }
        }
      }
      const int total = t1 + f;
      // Position rows of this row's keys: the table, or linear_pos(pe) past it.
      std::vector<double> prow(static_cast<size_t>(total) * d);
      for (int j = 0; j < total; ++j) {
        const int64_t pos = int64_t{s.offsets[b]} - t1 + j;
        if (pos < pos_rows) {
          for (int e = 0; e < d; ++e) prow[j * d + e] = v.at("pos")[pos * d + e];
        } else {
          SinusoidRow(pos, d, pe.data());
          for (int e = 0; e < d; ++e) {
            double acc = 0;
            for (int kk = 0; kk < d; ++kk)
              acc += static_cast<double>(v.at("linear_pos")[e * d + kk]) * pe[kk];
            prow[j * d + e] = acc;
          }
        }
      }
      for (int h = 0; h < s.heads; ++h) {
        for (int i = 0; i < f; ++i) {
          const float* q = &qkv[(int64_t{b} * s.chunk + i) * 3 * d + h * dk];
          std::vector<double> score(total);
          double mx = -1e300;
          for (int j = 0; j < total; ++j) {
            double acc = 0;
            for (int e = 0; e < dk; ++e) {
              acc += (q[e] + static_cast<double>(v.at("u")[h * dk + e])) * kp[at(slot, j, h) + e] +
                     (q[e] + static_cast<double>(v.at("v")[h * dk + e])) * prow[j * d + h * dk + e];
            }
            score[j] = acc / 8.0;
            mx = std::max(mx, score[j]);
          }
          double sum = 0;
          for (double& x : score) sum += (x = std::exp(x - mx));
          for (int e = 0; e < dk; ++e) {
            double acc = 0;
            for (int j = 0; j < total; ++j) acc += score[j] * vp[at(slot, j, h) + e];
            out[(int64_t{b} * s.chunk + i) * d + h * dk + e] = acc / sum;
          }
        }
      }
      if (s.fp8_pool) {  // The chunk attended to its K/V as computed; the pool keeps them rounded.
        for (int i = 0; i < f; ++i) {
          for (int h = 0; h < s.heads; ++h) {
            for (int e = 0; e < dk; ++e) {
              double& kx = kp[at(slot, t1 + i, h) + e];
              double& vx = vp[at(slot, t1 + i, h) + e];
              kx = RoundTo(fp8, static_cast<float>(kx));
              vx = RoundTo(fp8, static_cast<float>(vx));
            }
          }
        }
      }
    }
    ref["out"] = out;
    ref["k_pool"] = kp;
    ref["v_pool"] = vp;
    return ref;
  };
  double keys = 0;
  for (int b = 0; b < batch; ++b) keys += double(s.history[b] + s.frames[b]);
  c.flops = 6.0 * keys * 16 * d;
  c.bytes = keys * d * 2 * 3;
  return c;
}

}  // namespace oasr::kernels::testing
