#include "kernels/cuda_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/half.h"
#include "common/status.h"
#include "kernels/activation.h"
#include "kernels/wgmma_gemm.h"

namespace oasr::kernels {
namespace {

cudaDataType_t CudaType(DType d) {
  switch (d) {
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

absl::Status LtError(const char* what, cublasStatus_t st) {
  return absl::InternalError(
      absl::StrCat("cuBLASLt ", what, " failed with status ", static_cast<int>(st)));
}

#define OASR_LT(what, expr)                                                \
  do {                                                                     \
    const cublasStatus_t oasr_st_ = (expr);                                \
    if (oasr_st_ != CUBLAS_STATUS_SUCCESS) return LtError(what, oasr_st_); \
  } while (false)

absl::StatusOr<Tensor> Upload(const std::vector<float>& host, DType dtype, Device device) {
  const int64_t n = static_cast<int64_t>(host.size());
  OASR_ASSIGN_OR_RETURN(Tensor staged, Tensor::Empty({n}, dtype));
  ConvertFromFloat(host.data(), n, dtype, staged.data());
  OASR_ASSIGN_OR_RETURN(Tensor dev, Tensor::Empty({n}, dtype, device));
  OASR_RETURN_IF_ERROR(CopyTensor(dev.view(), staged.view()));
  return dev;
}

}  // namespace

struct CudaGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  float beta = 0.0f;
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CudaGemm::~CudaGemm() = default;

absl::StatusOr<std::unique_ptr<CudaGemm>> CudaGemm::Create(const float* weight, const float* bias,
                                                           int64_t out, int64_t in,
                                                           const LinearOptions& options,
                                                           ExecutionContext& ctx) {
  if (options.dtype != DType::kFloat32 && options.dtype != DType::kBFloat16 &&
      options.dtype != DType::kFloat16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinearOp: CUDA computes in float32, bfloat16 or float16, not ", DTypeName(options.dtype)));
  }
  std::unique_ptr<CudaGemm> g(new CudaGemm());
  g->out_ = out;
  g->in_ = in;
  g->options_ = options;
  std::vector<float> w(weight, weight + out * in);
  for (float& v : w) v *= options.scale;
  OASR_ASSIGN_OR_RETURN(g->weight_, Upload(w, options.dtype, ctx.device()));
  if (bias != nullptr) {
    std::vector<float> b(bias, bias + out);
    for (float& v : b) v *= options.scale;
    OASR_ASSIGN_OR_RETURN(g->bias_, Upload(b, options.dtype, ctx.device()));
    if (options.dtype != DType::kFloat32) {
      OASR_ASSIGN_OR_RETURN(g->bias_f32_, Upload(b, DType::kFloat32, ctx.device()));
    }
  }
  return g;
}

absl::StatusOr<CudaGemm::Plan*> CudaGemm::GetPlan(ExecutionContext& ctx, const LinearArgs& args) {
  const uint64_t key =
      absl::HashOf(args.m, args.ldx, args.ldy, static_cast<int>(args.y_dtype), args.accumulate);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  OASR_LT("MatmulDescCreate", cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  OASR_LT("set TRANSA", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &trans_a, sizeof(trans_a)));
  OASR_LT("set TRANSB", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &trans_b, sizeof(trans_b)));
  const bool has_bias = !bias_.empty();
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (options_.activation == Activation::kRelu) {
    epilogue = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  } else if (has_bias) {
    epilogue = CUBLASLT_EPILOGUE_BIAS;
  }
  OASR_LT("set EPILOGUE", cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                         &epilogue, sizeof(epilogue)));
  if (has_bias) {
    const bool f32_out = args.y_dtype == DType::kFloat32 && options_.dtype != DType::kFloat32;
    const void* bias = f32_out ? bias_f32_.data() : bias_.data();
    const cudaDataType_t bias_type = f32_out ? CUDA_R_32F : CudaType(options_.dtype);
    OASR_LT("set BIAS_POINTER",
            cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                           sizeof(bias)));
    OASR_LT("set BIAS_DATA_TYPE",
            cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                           &bias_type, sizeof(bias_type)));
  }
  // Column-major view: D^T [out x m] = W [in x out]^T * X^T [in x m].
  const cudaDataType_t ab = CudaType(options_.dtype), cd = CudaType(args.y_dtype);
  OASR_LT("layout A", cublasLtMatrixLayoutCreate(&plan->a, ab, in_, out_, in_));
  OASR_LT("layout B", cublasLtMatrixLayoutCreate(&plan->b, ab, in_, args.m, args.ldx));
  OASR_LT("layout C", cublasLtMatrixLayoutCreate(&plan->c, cd, out_, args.m, args.ldy));
  plan->beta = args.accumulate ? 1.0f : 0.0f;

  cublasLtMatmulPreference_t pref = nullptr;
  OASR_LT("PreferenceCreate", cublasLtMatmulPreferenceCreate(&pref));
  const size_t workspace = ctx.gemm_workspace_bytes();
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof(workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(ctx.cublaslt()), plan->op,
                                     plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    return absl::InternalError(
        absl::StrCat("cuBLASLt found no algorithm for [", args.m, " x ", in_, "] x [", in_, " x ",
                     out_, "] in ", DTypeName(options_.dtype), " -> ", DTypeName(args.y_dtype),
                     " (status ", static_cast<int>(st), ")"));
  }
  plan->algo = result.algo;
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

bool CudaGemm::FusesNorms() const {
  return ResolveGemm(options_.gemm) != GemmKernel::kCublas && options_.dtype != DType::kFloat32 &&
         out_ == 256 && WgmmaGemmAvailable();
}

namespace {
// kNorms and kEpilogues: the wgmma kernel from a wave of its tiles up.
bool FillsAWave(const ExecutionContext& ctx, int64_t m) {
  return m >= int64_t{kWgmmaNormsMinTiles} * kWgmmaTileRows * ctx.multiprocessors();
}
}  // namespace

bool CudaGemm::NormsInEpilogue(const ExecutionContext& ctx, int64_t m) const {
  if (!FusesNorms()) return false;
  const GemmKernel g = ResolveGemm(options_.gemm);
  if (g != GemmKernel::kNorms && g != GemmKernel::kEpilogues) return true;
  return FillsAWave(ctx, m);
}

bool CudaGemm::RunWgmma(ExecutionContext& ctx, const LinearArgs& args) {
  const bool norms = args.y_norm_scale != nullptr || args.out_norm_scale != nullptr;
  const GemmKernel g = ResolveGemm(options_.gemm);
  if (g == GemmKernel::kCublas) return false;
  if (g == GemmKernel::kNorms && !norms) return false;
  if ((g == GemmKernel::kFused || g == GemmKernel::kEpilogues) &&
      options_.activation != Activation::kSwish && !norms) {
    return false;
  }
  if (g == GemmKernel::kEpilogues && !FillsAWave(ctx, args.m)) return false;
  WgmmaGemmParams p;
  p.x = args.x;
  p.ldx = args.ldx;
  p.w = weight_.data();
  p.bias = bias_f32_.empty() ? nullptr : bias_f32_.data<float>();
  p.y = args.y;
  p.ldy = args.ldy;
  p.dtype = options_.dtype;
  p.m = args.m;
  p.n = out_;
  p.k = in_;
  p.y_dtype = args.y_dtype;
  p.activation = options_.activation;
  p.accumulate = args.accumulate;
  p.y_norm_scale = args.y_norm_scale;
  p.y_norm_shift = args.y_norm_shift;
  p.out_norm_scale = args.out_norm_scale;
  p.out_norm_shift = args.out_norm_shift;
  p.out = args.norm_out;
  p.ldo = args.ld_norm_out;
  p.eps = args.norm_eps;
  return LaunchWgmmaGemm(p, ctx.multiprocessors(), ctx.stream());
}

absl::Status CudaGemm::Run(ExecutionContext& ctx, const LinearArgs& args) {
  if (RunWgmma(ctx, args)) return absl::OkStatus();
  if (args.y_norm_scale != nullptr || args.out_norm_scale != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinearOp [", out_, ", ", in_, "]: the wgmma kernel does not take these norms (m ", args.m,
        ", ldx ", args.ldx, ", ldy ", args.ldy, ", ld_norm_out ", args.ld_norm_out, ")"));
  }
  OASR_ASSIGN_OR_RETURN(Plan * plan, GetPlan(ctx, args));
  const float alpha = 1.0f;
  OASR_LT("Matmul", cublasLtMatmul(static_cast<cublasLtHandle_t>(ctx.cublaslt()), plan->op, &alpha,
                                   weight_.data(), plan->a, args.x, plan->b, &plan->beta, args.y,
                                   plan->c, args.y, plan->c, &plan->algo, ctx.gemm_workspace(),
                                   ctx.gemm_workspace_bytes(), ctx.stream()));
  if (options_.activation == Activation::kSwish) {
    ActivationParams act;
    act.x = args.y;
    act.dtype = args.y_dtype;
    act.rows = args.m;
    act.cols = out_;
    act.ld = args.ldy;
    act.activation = Activation::kSwish;
    LaunchActivation(act, ctx.stream());
  }
  return absl::OkStatus();
}

}  // namespace oasr::kernels
